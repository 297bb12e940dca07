//! Elements read at the alignment their type has, not their size's: under a global allocator
//! that gives blocks of alignment 4 or less at an address that is 4 but never 8 aligned (legal:
//! `Complex<f32>` asks for 4), `Complex<f32>` programs copy, broadcast and select their 8-byte
//! elements (a debug build checks every typed read's alignment).
#![cfg(feature = "complex")]

use std::alloc::{GlobalAlloc, Layout, System};

use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;
use xla_bcast::stablehlo::{Program, Tensor};

/// Blocks of alignment up to 4 placed 4 bytes past an 8-aligned address.
struct FourAligned;

// SAFETY: every block comes from `System` with room for the shift, and is given back to it
// from the address it came from, with the layout it was asked with.
unsafe impl GlobalAlloc for FourAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match shifted(layout) {
            // SAFETY: a layout of non-zero size; the block is 4 bytes longer than asked for.
            Some(wide) => unsafe {
                let p = System.alloc(wide);
                if p.is_null() {
                    p
                } else {
                    p.add(4)
                }
            },
            // SAFETY: as the caller promised.
            None => unsafe { System.alloc(layout) },
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match shifted(layout) {
            // SAFETY: `ptr` is 4 past the block `alloc` took for this layout.
            Some(wide) => unsafe { System.dealloc(ptr.sub(4), wide) },
            // SAFETY: as the caller promised.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }
}

/// The layout taken from `System` for a block that is shifted: 4 bytes longer, 8-aligned.
fn shifted(layout: Layout) -> Option<Layout> {
    (layout.align() <= 4).then(|| Layout::from_size_align(layout.size() + 4, 8).unwrap())
}

#[global_allocator]
static ALLOC: FourAligned = FourAligned;

fn c64(shape: &[usize], k: f32) -> Tensor {
    let n = shape.iter().product();
    let v: Vec<Complex<f32>> = (0..n).map(|i| Complex::new(i as f32 + k, -k)).collect();
    Tensor::from(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

#[test]
fn complex_f32_elements_are_read_at_their_own_alignment() {
    let x = c64(&[3], 0.5);
    match &x {
        Tensor::C64(a) => assert_eq!(a.as_ptr() as usize % 8, 4, "the allocator did not shift"),
        other => panic!("not a Complex<f32> tensor: {other:?}"),
    }
    let mut p = Program::new("c64");
    let v = p.parameter::<Complex<f32>>(&[3]);
    let w = p.parameter::<Complex<f32>>(&[2, 3]);
    let b = p.broadcast_in_dim(v, &[2, 3], &[1]).unwrap();
    let s = p.add(b, w, &[]).unwrap();
    let eq = p.eq(s, w, &[]).unwrap();
    let y = p.select(eq, b, s).unwrap();
    p.output(y).unwrap();
    p.output(b).unwrap();
    let inputs = [x, c64(&[2, 3], 2.0)];
    let want = p.run(&inputs).unwrap();
    assert_eq!(p.compile().unwrap().run(&inputs).unwrap(), want);
    let Tensor::C64(b) = &want[1] else {
        panic!("a Complex<f32> result")
    };
    assert_eq!(b[[1, 2]], Complex::new(2.5, -0.5));
}
