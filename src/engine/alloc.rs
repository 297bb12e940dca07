//! Fresh outputs. A large fresh array costs more in page faults than in arithmetic, so on
//! Linux the engine asks for transparent huge pages on the part of a large allocation that is
//! 2 MiB aligned (as NumPy does), and the parallel kernels make the first touch from every thread.

use std::mem::MaybeUninit;

use ndarray::{Array, Dimension};

/// Outputs at least this large (in bytes) get the huge-page advice.
#[cfg(target_os = "linux")]
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// An uninitialised array of shape `dim` in standard layout. The caller has checked that the
/// element count fits `isize`.
pub(super) fn uninit<C, D: Dimension>(dim: D) -> Array<MaybeUninit<C>, D> {
    let mut out = Array::<C, D>::uninit(dim);
    advise_huge_pages(
        out.as_mut_ptr() as *mut u8,
        out.len() * std::mem::size_of::<C>(),
    );
    out
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
