//! Fresh outputs. A large fresh array costs more in page faults than in arithmetic, so on
//! Linux the engine asks for transparent huge pages on the part of a large allocation that is
//! 2 MiB aligned (as NumPy does), and the parallel kernels make the first touch from every thread.

use std::mem::MaybeUninit;

use ndarray::{Array, Dimension, ShapeBuilder};

use crate::error::{BroadcastError, Result};

/// Outputs at least this large (in bytes) get the huge-page advice.
#[cfg(target_os = "linux")]
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// An uninitialised array of shape `dim`, contiguous with its dims laid out in `order`
/// (outermost first; `None` for standard layout), or an error (never an abort) when its bytes
/// do not fit `isize` or the allocator refuses them.
pub(super) fn uninit<C, D: Dimension>(
    op: &'static str,
    dim: D,
    order: Option<&[usize]>,
) -> Result<Array<MaybeUninit<C>, D>> {
    let fail = |dim: &D| BroadcastError::Allocation {
        op,
        shape: dim.slice().into(),
        bytes: dim
            .size_checked()
            .and_then(|n| n.checked_mul(std::mem::size_of::<C>())),
    };
    let len = dim.size_checked().ok_or_else(|| fail(&dim))?;
    let mut buffer: Vec<MaybeUninit<C>> = with_capacity(len).ok_or_else(|| fail(&dim))?;
    // SAFETY: the capacity is `len` and `MaybeUninit` needs no initialisation.
    unsafe { buffer.set_len(len) };
    let shape = dim.clone();
    match order {
        None => Array::from_shape_vec(dim, buffer),
        Some(order) => {
            let mut strides = D::zeros(dim.ndim());
            let mut step = 1;
            for &ax in order.iter().rev() {
                strides[ax] = step;
                step *= dim[ax];
            }
            Array::from_shape_vec(dim.strides(strides), buffer)
        }
    }
    .map_err(|_| fail(&shape))
}

/// An empty vector with room for exactly `len` elements, its large pages advised as huge, or
/// `None` when the allocator refuses it.
pub(crate) fn with_capacity<C>(len: usize) -> Option<Vec<C>> {
    let mut buffer: Vec<C> = Vec::new();
    buffer.try_reserve_exact(len).ok()?;
    advise_huge_pages(
        buffer.as_mut_ptr() as *mut u8,
        len * std::mem::size_of::<C>(),
    );
    Some(buffer)
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    if bytes < HUGE_PAGE_MIN_BYTES {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + bytes) & !(HUGE - 1);
    if end > start {
        // SAFETY: [start, end) lies inside the allocation we own and have not handed out;
        // MADV_HUGEPAGE only changes how the kernel backs those pages, never their contents or
        // ownership, and a failure (e.g. THP disabled) is harmless, so its result is ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _bytes: usize) {}
