//! Code the integration tests share (each test uses some of it).

#[allow(dead_code)]
pub mod workloads;

use xla_bcast::stablehlo::Tensor;

/// The bits of every element of a float, `i32` or `bool` tensor, any NaN equal to any NaN.
#[allow(dead_code)]
pub fn bits(t: &Tensor) -> Vec<u64> {
    match t {
        Tensor::F32(a) => a
            .iter()
            .map(|v| if v.is_nan() { 1 } else { v.to_bits().into() })
            .collect(),
        Tensor::F64(a) => a
            .iter()
            .map(|v| if v.is_nan() { 1 } else { v.to_bits() })
            .collect(),
        #[cfg(feature = "half")]
        Tensor::F16(a) => a
            .iter()
            .map(|v| if v.is_nan() { 1 } else { v.to_bits().into() })
            .collect(),
        #[cfg(feature = "half")]
        Tensor::Bf16(a) => a
            .iter()
            .map(|v| if v.is_nan() { 1 } else { v.to_bits().into() })
            .collect(),
        Tensor::I32(a) => a.iter().map(|&v| v as u32 as u64).collect(),
        Tensor::Pred(a) => a.iter().map(|&v| v as u64).collect(),
        other => panic!("no bits for {other:?}"),
    }
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

#[allow(dead_code)]
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `[-4, 4)`, on a grid of 2^-21.
    pub fn f32(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0
    }
}
