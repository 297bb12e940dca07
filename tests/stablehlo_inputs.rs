//! Executables read the caller's arrays and views where they lie: a counting allocator shows
//! that a run on borrowed inputs allocates nothing the size of an input, where a copy would.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ndarray::{Array1, Array2, ArrayD};
use xla_bcast::stablehlo::{Program, Tensor, TensorView};

/// The system allocator, counting the bytes it hands out.
struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; the counter is only read.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        // SAFETY: as the caller promised for `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes allocated while `f` runs.
fn allocated(f: impl FnOnce()) -> usize {
    let before = ALLOCATED.load(Ordering::Relaxed);
    f();
    ALLOCATED.load(Ordering::Relaxed) - before
}

#[test]
fn executables_read_borrowed_inputs_without_copying_them() {
    let (m, n) = (512, 256);
    let mut p = Program::new("bias_scale");
    let x = p.parameter::<f32>(&[m, n]);
    let b = p.parameter::<f32>(&[n]);
    let two = p.constant(2.0f32);
    let y = p.add(x, b, &[1]).unwrap();
    let y = p.mul(y, two, &[]).unwrap();
    p.output(y).unwrap();
    let exe = p.compile().unwrap();

    let xs = Array2::from_shape_fn((m, n), |(i, j)| (i * n + j) as f32 * 0.25);
    let bs = Array1::from_shape_fn(n, |j| j as f32);
    let want = (&xs + &bs) * 2.0;
    let input_bytes = m * n * 4;

    // Into the caller's output, from borrowed views: after a first call, no large allocation.
    let mut out = [Tensor::from(ArrayD::<f32>::zeros(ndarray::IxDyn(&[m, n])))];
    let views = [TensorView::from(&xs), TensorView::from(&bs)];
    exe.run_views_into(
        &views,
        &mut out.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
    )
    .unwrap();
    let bytes = allocated(|| {
        exe.run_views_into(
            &views,
            &mut out.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
        )
        .unwrap()
    });
    assert!(
        bytes < input_bytes / 8,
        "{bytes} bytes for a {input_bytes}-byte input"
    );
    assert_eq!(out[0].view::<f32>().unwrap(), want.view().into_dyn());

    // A transposed view is read where it lies too.
    let xt = xs.t().to_owned();
    let views = [TensorView::from(xt.t()), TensorView::from(&bs)];
    let bytes = allocated(|| {
        exe.run_views_into(
            &views,
            &mut out.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
        )
        .unwrap()
    });
    assert!(
        bytes < input_bytes / 8,
        "{bytes} bytes for a transposed input"
    );
    assert_eq!(out[0].view::<f32>().unwrap(), want.view().into_dyn());

    // Allocating its result: that result and nothing the size of an input besides.
    let bytes = allocated(|| drop(exe.run_views(&views).unwrap()));
    assert!(bytes < input_bytes + input_bytes / 8, "{bytes} bytes");
    // The owned tensors' path copies nothing either.
    let owned = [
        Tensor::from(xs.clone().into_dyn()),
        Tensor::from(bs.clone().into_dyn()),
    ];
    let bytes = allocated(|| {
        exe.run_into(
            &owned,
            &mut out.iter_mut().map(Tensor::view_mut).collect::<Vec<_>>(),
        )
        .unwrap()
    });
    assert!(bytes < input_bytes / 8, "{bytes} bytes");
    // `Program::run` reads views in place as well.
    let got = p.run_views(&views).unwrap();
    assert_eq!(got[0], Tensor::from(want.into_dyn()));
}
