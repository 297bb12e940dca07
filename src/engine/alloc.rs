//! Fresh outputs. A large fresh array costs more in page faults than in arithmetic, so on
//! Linux the engine asks for transparent huge pages on the part of a large allocation that is
//! 2 MiB aligned (as NumPy does; a 64 MiB result then takes a third of the time), and the
//! parallel kernels make the first touch from every thread.

use std::mem::MaybeUninit;

use ndarray::{Array, Dimension, ShapeBuilder, StrideShape};

use super::plan::Order;
use crate::error::{BroadcastError, Result};

/// Outputs at least this large (in bytes) get the huge-page advice.
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// An uninitialised array of shape `dim`, contiguous with its dims laid out in `order`, or an
/// error (never an abort) when its bytes do not fit `isize` or the allocator refuses them.
pub(super) fn uninit<C, D: Dimension>(
    op: &'static str,
    dim: D,
    order: Order<&[usize]>,
) -> Result<Array<MaybeUninit<C>, D>> {
    let fail = |dim: &D| refused::<C, D>(op, dim);
    let len = dim.size_checked().ok_or_else(|| fail(&dim))?;
    let mut buffer: Vec<MaybeUninit<C>> = with_capacity(len).ok_or_else(|| fail(&dim))?;
    // SAFETY: the capacity is `len` and `MaybeUninit` needs no initialisation.
    unsafe { buffer.set_len(len) };
    let shape = match len {
        // An empty array has no memory to order (ndarray gives it zero strides), but its other
        // dims may still overflow `isize`.
        0 if !fits_isize(dim.slice()) => return Err(fail(&dim)),
        0 => dim.into(),
        _ => layout(dim, order),
    };
    // SAFETY: the product of the nonzero dims fits `isize` (checked for an empty array; else
    // the allocator took `len` elements of bytes that fit it), and so does every offset; the
    // strides are those of a contiguous layout of `dim` (a permutation of its dims, outermost
    // first) over exactly `len` elements, or an empty array's.
    Ok(unsafe { Array::from_shape_vec_unchecked(shape, buffer) })
}

/// A fresh array of plain elements known by their size and alignment only, not yet written:
/// programs allocate their results through it whatever their element type, so that only taking
/// the written buffer as an ndarray array ([`Blank::assume_init`]) is compiled per type.
#[cfg(feature = "stablehlo")]
pub(crate) struct Blank {
    ptr: std::ptr::NonNull<u8>,
    /// The allocation's bytes (0: nothing allocated) and alignment.
    bytes: usize,
    align: usize,
    /// Each element's bytes, and the elements.
    size: usize,
    len: usize,
    shape: Vec<usize>,
    /// In elements: a contiguous layout of `shape` (zeros when it is empty, as ndarray's).
    strides: super::operand::Strides,
}

#[cfg(feature = "stablehlo")]
impl Blank {
    /// Room for an array of `shape` whose elements are `size` bytes aligned to `align` (a
    /// power of two), contiguous with its dims laid out in `order`; an error (never an abort)
    /// when its bytes do not fit `isize` or the allocator refuses them.
    pub(crate) fn new(
        op: &'static str,
        size: usize,
        align: usize,
        shape: &[usize],
        order: Order<&[usize]>,
    ) -> Result<Blank> {
        let len = shape.iter().try_fold(1usize, |p, &n| p.checked_mul(n));
        let bytes = len.and_then(|n| n.checked_mul(size));
        let fail = || BroadcastError::Allocation {
            op,
            shape: shape.into(),
            bytes,
        };
        let (len, bytes) = match (len, bytes) {
            (Some(len), Some(bytes)) if fits_isize(shape) && bytes <= isize::MAX as usize => {
                (len, bytes)
            }
            _ => return Err(fail()),
        };
        let layout = std::alloc::Layout::from_size_align(bytes, align).map_err(|_| fail())?;
        let ptr = match bytes {
            // A dangling pointer at the alignment: nothing to allocate.
            0 => std::ptr::NonNull::new(align as *mut u8),
            // SAFETY: the layout's size is nonzero.
            _ => std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) }),
        }
        .ok_or_else(fail)?;
        if huge(bytes) {
            advise_huge_pages(ptr.as_ptr(), bytes);
        }
        let strides = match len {
            0 => smallvec::smallvec![0; shape.len()],
            _ => contiguous_strides(shape, order),
        };
        Ok(Blank {
            ptr,
            bytes,
            align,
            size,
            len,
            shape: shape.to_vec(),
            strides,
        })
    }

    /// The array to write, as the walk's output.
    pub(crate) fn operand(&mut self) -> super::operand::Operand<'_> {
        super::operand::Operand::written(self.ptr.as_ptr(), self.size, &self.shape, &self.strides)
    }

    /// The shape and strides of the written array, for ndarray (compiled once, not per `T`).
    fn layout(&mut self) -> ndarray::StrideShape<ndarray::IxDyn> {
        let shape = std::mem::take(&mut self.shape);
        let mut strides = Vec::with_capacity(self.strides.len());
        for &s in &self.strides {
            strides.push(s as usize);
        }
        ndarray::IxDyn(&shape).strides(ndarray::IxDyn(&strides))
    }

    /// The written array, as an ndarray array of `T`, without a copy.
    ///
    /// # Safety
    /// `T` has the size and alignment the blank was made for, and every element was written
    /// with a `T`.
    pub(crate) unsafe fn assume_init<T>(mut self) -> ndarray::ArrayD<T> {
        debug_assert!(size_of::<T>() == self.size && align_of::<T>() == self.align);
        let shape = self.layout();
        let buffer = match self.bytes {
            0 => Vec::new(),
            // SAFETY: `len` elements of `T` allocated by the global allocator with `T`'s
            // size and alignment, each written, as the caller promised; ownership moves to
            // the vector (the blank frees nothing once `bytes` is 0).
            _ => unsafe { Vec::from_raw_parts(self.ptr.as_ptr().cast::<T>(), self.len, self.len) },
        };
        self.bytes = 0;
        // SAFETY: the strides are a contiguous layout of the shape over exactly `len`
        // elements, all nonnegative (the first element is the buffer's), or an empty array's
        // zeros, and the shape's bytes fit `isize` (checked when it was made).
        unsafe { ndarray::ArrayD::from_shape_vec_unchecked(shape, buffer) }
    }
}

/// The strides (in elements) of a contiguous layout of `shape` with its dims in `order`.
#[cfg(feature = "stablehlo")]
pub(super) fn contiguous_strides(
    shape: &[usize],
    order: Order<&[usize]>,
) -> super::operand::Strides {
    let mut strides: super::operand::Strides = smallvec::smallvec![0; shape.len()];
    let mut step = 1isize;
    for i in (0..shape.len()).rev() {
        let d = order.outer(i, shape.len());
        strides[d] = step;
        step = step.wrapping_mul(shape[d] as isize);
    }
    strides
}

#[cfg(feature = "stablehlo")]
impl Drop for Blank {
    fn drop(&mut self) {
        if self.bytes > 0 {
            // SAFETY: allocated in `new` with this size and alignment, and not handed on.
            unsafe {
                let layout = std::alloc::Layout::from_size_align_unchecked(self.bytes, self.align);
                std::alloc::dealloc(self.ptr.as_ptr(), layout)
            }
        }
    }
}

/// Whether the product of the nonzero lengths of `shape` fits `isize`.
#[inline(never)]
fn fits_isize(shape: &[usize]) -> bool {
    shape
        .iter()
        .filter(|&&n| n != 0)
        .try_fold(1usize, |p, &n| p.checked_mul(n))
        .is_some_and(|p| p <= isize::MAX as usize)
}

/// The contiguous layout of `dim` with its dims in `order`; apart from the element type, so
/// that each element type compiles only the allocation.
#[inline(never)]
fn layout<D: Dimension>(dim: D, order: Order<&[usize]>) -> StrideShape<D> {
    match order {
        Order::Standard => dim.into(),
        Order::Reversed => dim.f().into(),
        Order::Dims(order) => {
            debug_assert!((0..dim.ndim()).all(|ax| order.contains(&ax)));
            let mut strides = D::zeros(dim.ndim());
            let mut step = 1;
            for &ax in order.iter().rev() {
                strides[ax] = step;
                step *= dim[ax];
            }
            dim.strides(strides)
        }
    }
}

/// The error for an array of `C` of shape `dim` that cannot be allocated.
pub(crate) fn refused<C, D: Dimension>(op: &'static str, dim: &D) -> BroadcastError {
    BroadcastError::Allocation {
        op,
        shape: dim.slice().into(),
        bytes: dim
            .size_checked()
            .and_then(|n| n.checked_mul(std::mem::size_of::<C>())),
    }
}

/// An array of shape `dim` (standard layout) with every element a clone of `value`, or an error
/// (never an abort) when it cannot be allocated.
pub(crate) fn filled<A: Clone, D: Dimension>(
    op: &'static str,
    dim: D,
    value: &A,
) -> Result<Array<A, D>> {
    let fail = |dim: &D| refused::<A, D>(op, dim);
    let len = dim.size_checked().ok_or_else(|| fail(&dim))?;
    let mut buffer: Vec<A> = with_capacity(len).ok_or_else(|| fail(&dim))?;
    // Within the capacity: no reallocation, so no abort.
    buffer.resize(len, value.clone());
    Array::from_shape_vec(dim.clone(), buffer).map_err(|_| fail(&dim))
}

/// An empty vector with room for exactly `len` elements, its whole huge pages advised as huge,
/// or `None` when the allocator refuses it.
pub(crate) fn with_capacity<C>(len: usize) -> Option<Vec<C>> {
    let bytes = len.checked_mul(std::mem::size_of::<C>())?;
    let mut buffer: Vec<C> = Vec::new();
    buffer.try_reserve_exact(len).ok()?;
    if huge(bytes) {
        advise_huge_pages(buffer.as_mut_ptr().cast(), bytes);
    }
    Some(buffer)
}

/// Whether an allocation of `bytes` gets the huge-page advice.
fn huge(bytes: usize) -> bool {
    cfg!(target_os = "linux") && bytes >= HUGE_PAGE_MIN_BYTES
}

/// The huge page size the advice works in (x86-64 and aarch64 with 4 KiB base pages).
const HUGE: usize = 2 << 20;

/// Advises as huge the whole 2 MiB-aligned pages of the `bytes` from `ptr`, which the caller
/// owns.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_have_exactly_the_capacity_asked_for() {
        for len in [1000, (HUGE_PAGE_MIN_BYTES + HUGE) / 4 + 3] {
            let v = with_capacity::<f32>(len).unwrap();
            assert!(
                v.is_empty() && v.capacity() == len,
                "{len}: {}",
                v.capacity()
            );
        }
        // A length whose bytes overflow is refused, not a panic.
        assert!(with_capacity::<f64>(usize::MAX / 4).is_none());
    }

    /// A blank is laid out in the order asked for, hands its elements over as an ndarray array
    /// of that layout, and refuses what cannot be allocated; an empty one allocates nothing.
    #[cfg(feature = "stablehlo")]
    #[test]
    fn blanks_are_laid_out_and_handed_over() {
        // 8-byte elements aligned to 4, as `Complex<f32>` is.
        let mut b = Blank::new("t", 8, 4, &[2, 3], Order::Reversed).unwrap();
        let out = b.operand();
        assert_eq!(&out.strides[..], &[1, 2]);
        for i in 0..2 {
            for j in 0..3 {
                // SAFETY: element (i, j) of the blank, written as the `[u32; 2]` it holds.
                unsafe {
                    let at = out.at(i + 2 * j).cast::<[u32; 2]>();
                    at.write([i as u32, j as u32]);
                }
            }
        }
        // SAFETY: `[u32; 2]` has the blank's size and alignment; every element was written.
        let a = unsafe { b.assume_init::<[u32; 2]>() };
        assert_eq!(a.shape(), &[2, 3]);
        assert_eq!(a.strides(), &[1, 2]);
        assert_eq!(a[[1, 2]], [1, 2]);
        assert!(a.t().is_standard_layout());

        let empty = Blank::new("t", 4, 4, &[0, 5], Order::Standard).unwrap();
        assert_eq!(empty.bytes, 0);
        // SAFETY: an empty array has no element to write.
        let e = unsafe { empty.assume_init::<f32>() };
        assert_eq!(e.shape(), &[0, 5]);

        for shape in [&[usize::MAX, 2][..], &[0, usize::MAX, 3]] {
            let refused = Blank::new("t", 4, 4, shape, Order::Standard);
            assert!(matches!(
                refused,
                Err(BroadcastError::Allocation { op: "t", .. })
            ));
        }
    }

    /// The advice reaches a large vector's whole huge pages: the kernel's flags for the
    /// mapping that holds its middle say "hg" (advised huge).
    #[cfg(target_os = "linux")]
    #[test]
    fn large_vectors_are_advised_huge() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            return; // a kernel without THP: the advice fails harmlessly, nothing to see
        }
        let len = 3 * HUGE_PAGE_MIN_BYTES / 4;
        let buffer = with_capacity::<f32>(len).unwrap();
        let middle = buffer.as_ptr() as usize + len * 2;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut holds = false;
        let mut flags = None;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    holds = (lo..hi).contains(&middle);
                    continue;
                }
            }
            if holds && line.starts_with("VmFlags:") {
                flags = Some(line.to_string());
            }
        }
        let flags = flags.expect("a mapping holds the buffer");
        assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
    }
}
