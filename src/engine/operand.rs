//! The engine's one operand type: an array seen at the walk's shape, as its first element, its
//! element size and its strides at that shape (0 where it broadcasts). [`Src`] is the typed
//! handle the shape rules build (only through constructors that check the placement); the
//! walk erases the type.

use std::marker::PhantomData;

use ndarray::{ArrayRef, Dimension};
use smallvec::SmallVec;

use super::transpose;
use crate::error::{BroadcastError, Result};
use crate::shape::{in_dim_check, iota, same_dims};
use crate::view::place_strides;

/// Strides of an operand, inline up to rank 6.
pub(crate) type Strides = SmallVec<[isize; 6]>;

/// The strides of a scalar read at every index of a shape of rank up to 16.
static ZEROS: [isize; 16] = [0; 16];

/// An operand's strides: its array's own (the common case, borrowed: nothing to copy on the
/// hot path of small ops), or strides made for a broadcast.
pub enum StridesAt<'a> {
    Own(&'a [isize]),
    Made(Strides),
}

impl std::ops::Deref for StridesAt<'_> {
    type Target = [isize];
    #[inline(always)]
    fn deref(&self) -> &[isize] {
        match self {
            StridesAt::Own(s) => s,
            StridesAt::Made(s) => s,
        }
    }
}

/// An operand of a walk, type erased. Every index of `shape` addresses one of its elements at
/// `ptr + strides . index` (elements of `size` bytes).
pub struct Operand<'a> {
    ptr: *mut u8,
    pub size: usize,
    /// Plain bits that a transposing walk may stage ([`transpose::plain_size`]); never for the
    /// written operand.
    pub plain: bool,
    pub shape: &'a [usize],
    pub strides: StridesAt<'a>,
}

// SAFETY: the engine's entry points require `Send + Sync` element types; a walk hands each
// thread distinct output elements and only reads the inputs.
unsafe impl Send for Operand<'_> {}
// SAFETY: as for `Send`.
unsafe impl Sync for Operand<'_> {}

impl<'a> Operand<'a> {
    /// The written operand: `out` at its own shape.
    #[inline(always)]
    pub fn output<T, D: Dimension>(out: &'a mut ArrayRef<T, D>) -> Self {
        let ptr = out.as_mut_ptr().cast();
        let out: &'a ArrayRef<T, D> = out;
        Operand {
            ptr,
            size: size_of::<T>(),
            plain: false,
            shape: out.shape(),
            strides: StridesAt::Own(out.strides()),
        }
    }

    /// The written operand: elements of `size` bytes from `ptr`, at `shape` with `strides`.
    #[cfg(feature = "stablehlo")]
    pub fn written(ptr: *mut u8, size: usize, shape: &'a [usize], strides: &'a [isize]) -> Self {
        Operand {
            ptr,
            size,
            plain: false,
            shape,
            strides: StridesAt::Own(strides),
        }
    }

    /// One-byte elements from `ptr` at `shape` with `strides`, read by no kernel: an indexed
    /// zip's positions (`zip::indexed`), each element's address giving its index.
    pub fn positions(ptr: *const u8, shape: &'a [usize], strides: Strides) -> Self {
        let strides = StridesAt::Made(strides);
        let (ptr, size, plain) = (ptr.cast_mut(), 1, false);
        Operand {
            ptr,
            size,
            plain,
            shape,
            strides,
        }
    }

    /// An element pointer and strides of `T`s at `shape`, as an input.
    #[inline(always)]
    fn input<T>(ptr: *const T, shape: &'a [usize], strides: StridesAt<'a>) -> Self {
        Operand {
            ptr: ptr as *mut u8,
            size: size_of::<T>(),
            plain: transpose::plain_size::<T>().is_some(),
            shape,
            strides,
        }
    }

    /// The same operand, its strides borrowed.
    #[cfg(feature = "stablehlo")]
    pub fn reborrow(&self) -> Operand<'_> {
        Operand {
            ptr: self.ptr,
            size: self.size,
            plain: self.plain,
            shape: self.shape,
            strides: StridesAt::Own(&self.strides),
        }
    }

    /// # Safety
    /// `off` is the element offset of an element of this operand's array.
    #[inline(always)]
    pub unsafe fn at(&self, off: isize) -> *mut u8 {
        // SAFETY: the byte offset of an element of the same array, as the caller promised.
        unsafe { self.ptr.offset(off * self.size as isize) }
    }

    /// Whether it reads one element for every index (all strides 0).
    #[inline(always)]
    pub fn is_scalar(&self) -> bool {
        self.strides.iter().all(|&s| s == 0)
    }

    /// The bytes a walk of `len` elements streams through this operand: all of them, or none
    /// for a broadcast one (stride 0 on a dim longer than 1), whose repeats hit the cache.
    pub fn traffic(&self, len: usize) -> usize {
        let repeats = self
            .strides
            .iter()
            .zip(self.shape)
            .any(|(&s, &n)| s == 0 && n > 1);
        if repeats {
            0
        } else {
            len.saturating_mul(self.size)
        }
    }
}

/// The bytes a walk of `len` elements moves through `operands` ([`Operand::traffic`]): the
/// engine's one estimate, from which it decides one run and threads.
pub(crate) fn traffic(len: usize, operands: &[&Operand<'_>]) -> usize {
    operands
        .iter()
        .map(|o| o.traffic(len))
        .fold(0, usize::saturating_add)
}

/// A pointer the threads of one walk or chain share: each writes distinct elements through it
/// (its ranges' rows, its blocks' partial rows), or all only read (an identity, a fold). The
/// engine's one such wrapper.
#[derive(Clone, Copy)]
pub(crate) struct Shared(pub *mut u8);

// SAFETY: as said of the type: no element is touched from two threads unless only read.
unsafe impl Send for Shared {}
// SAFETY: as for `Send`.
unsafe impl Sync for Shared {}

/// An input of elements `T`, seen at an output shape: built only from a borrowed array by
/// constructors that check the placement against the shape rule, so every output index reads
/// one of its elements.
#[repr(transparent)]
pub struct Src<'a, T> {
    operand: Operand<'a>,
    _borrow: PhantomData<&'a T>,
}

impl<'a, T> Src<'a, T> {
    /// `a` as it is, at its own shape.
    #[inline]
    pub fn of<D: Dimension>(a: &'a ArrayRef<T, D>) -> Self {
        Src::new(Operand::input(
            a.as_ptr(),
            a.shape(),
            StridesAt::Own(a.strides()),
        ))
    }

    /// `a` broadcast to `out_shape` of the same rank, where every dim of `a` is 1 or the
    /// output's (degenerate broadcasting); the rule's error otherwise.
    #[inline(always)]
    pub fn degenerate<D: Dimension>(
        op: &'static str,
        a: &'a ArrayRef<T, D>,
        out_shape: &'a [usize],
    ) -> Result<Self> {
        if same_dims(a.shape(), out_shape) {
            return Ok(Src::new(Operand::input(
                a.as_ptr(),
                out_shape,
                StridesAt::Own(a.strides()),
            )));
        }
        let fits = a.ndim() == out_shape.len()
            && a.shape()
                .iter()
                .zip(out_shape)
                .all(|(&n, &m)| n == m || n == 1);
        if !fits {
            return Err(refused(op, a.shape(), out_shape));
        }
        let mut strides = SmallVec::from_slice(a.strides());
        for ((s, &n), &m) in strides.iter_mut().zip(a.shape()).zip(out_shape) {
            if n != m {
                *s = 0;
            }
        }
        Ok(Src::new(Operand::input(
            a.as_ptr(),
            out_shape,
            StridesAt::Made(strides),
        )))
    }

    /// `a` placed into `out_shape` by `broadcast_in_dim` dims (a rank-0 `a` with none: a
    /// scalar read at every index); the rule's error when they do not place it.
    pub fn placed<D: Dimension>(
        op: &'static str,
        a: &'a ArrayRef<T, D>,
        out_shape: &'a [usize],
        dims: &[usize],
    ) -> Result<Self> {
        in_dim_check(op, a.shape(), out_shape, dims)?;
        if let Some(scalar) = Src::scalar(a, out_shape) {
            return Ok(scalar);
        }
        let strides = place_strides(a.shape(), a.strides(), out_shape, dims);
        Ok(Src::new(Operand::input(
            a.as_ptr(),
            out_shape,
            StridesAt::Made(strides),
        )))
    }

    /// A rank-0 `a` read at every index of `out_shape` (which XLA's rule allows for any shape
    /// with no dims); `None` when `a` has a rank, or `out_shape` more than 16 dims.
    #[inline(always)]
    pub fn scalar<D: Dimension>(a: &'a ArrayRef<T, D>, out_shape: &'a [usize]) -> Option<Self> {
        // No strides to make: the static zeros.
        (a.ndim() == 0 && out_shape.len() <= ZEROS.len()).then(|| {
            let strides = StridesAt::Own(&ZEROS[..out_shape.len()]);
            Src::new(Operand::input(a.as_ptr(), out_shape, strides))
        })
    }

    #[inline(always)]
    fn new(operand: Operand<'a>) -> Self {
        Src {
            operand,
            _borrow: PhantomData,
        }
    }

    /// The shape it is seen at.
    #[inline(always)]
    pub fn shape(&self) -> &'a [usize] {
        self.operand.shape
    }

    /// The untyped operand.
    #[inline(always)]
    pub fn operand(&self) -> &Operand<'a> {
        &self.operand
    }

    /// The untyped operand, owned: for a walk that takes its element types from elsewhere
    /// (a kernel table's kernel for `T`).
    #[cfg(feature = "stablehlo")]
    pub fn into_operand(self) -> Operand<'a> {
        self.operand
    }
}

/// The rule's error for an operand of shape `shape` that does not broadcast degenerately to
/// `out_shape`.
#[cold]
#[inline(never)]
fn refused(op: &'static str, shape: &[usize], out_shape: &[usize]) -> BroadcastError {
    match in_dim_check(op, shape, out_shape, &iota(shape.len())) {
        Err(e) => e,
        Ok(()) => unreachable!("a degenerate placement that in_dim_check accepts fits"),
    }
}

/// The engine's one precondition on its inputs, which [`Src`]'s constructors make true for
/// the shape they were built at: each is seen at the output's shape (a mismatch would be a bug
/// in the crate, never a user error, which the shape rules catch).
#[inline(always)]
pub(super) fn same_shape(out: &[usize], input: &Operand<'_>) {
    #[cold]
    #[inline(never)]
    fn mismatch(out: &[usize], input: &[usize]) -> ! {
        panic!("engine: an input seen at {input:?}, not at the output shape {out:?}")
    }
    if !same_dims(out, input.shape) {
        mismatch(out, input.shape)
    }
}
