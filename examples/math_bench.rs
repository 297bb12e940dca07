//! Per-element time of programs' transcendental ops, `f32`, allocating (`Program::run` of a
//! one-op program), as `tools/math_bench.py` compares them with NumPy's in one run. Prints one
//! line per op and size: `op n ns_per_element`, the best of a few batches.
//!
//! `cargo run --release --example math_bench`

use std::hint::black_box;
use std::time::Instant;

use ndarray::Array2;
use xla_bcast::stablehlo::{Program, Tensor, Value};
use xla_bcast::BroadcastError;

type Unary = fn(&mut Program, Value) -> Result<Value, BroadcastError>;

fn main() {
    let ops: [(&str, Unary); 6] = [
        ("exp", Program::exp),
        ("log", Program::log),
        ("tanh", Program::tanh),
        ("logistic", Program::logistic),
        ("sin", Program::sin),
        ("sqrt", Program::sqrt),
    ];
    for n in [512usize, 4096] {
        // Inputs where every op is defined: (0, 5].
        let x = Array2::from_shape_fn((n, n), |(i, j)| ((i * n + j) % 1000) as f32 * 0.005 + 0.001);
        let input = [Tensor::from(x.into_dyn())];
        for (name, record) in ops {
            let mut p = Program::new(name);
            let v = p.parameter::<f32>(&[n, n]);
            let y = record(&mut p, v).expect("defined on f32");
            p.output(y).expect("the program's value");
            let calls = if n == 512 { 20 } else { 3 };
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..calls {
                    black_box(p.run(&input).expect("runs"));
                }
                best = best.min(t.elapsed().as_secs_f64() / calls as f64);
            }
            println!("{name} {n} {:.4}", best * 1e9 / (n * n) as f64);
        }
    }
}
