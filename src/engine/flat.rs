//! Small walks over contiguous operands. When every input of a fresh result either has the
//! result's shape and is contiguous in one memory order (C or F, the same for all), or is a
//! rank-0 array broadcast to every index, the whole walk is one run of the kernel: no view of
//! the operands at the output shape, no plan. That is the shape of most of the small ops of
//! numeric code, where the fixed cost is most of the cost (8x8 f32 add: 134 ns through the
//! planner, against ndarray's 97 ns; a hand loop into a fresh vector 59 ns).

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use ndarray::{Array, ArrayRef, Dimension};
use smallvec::SmallVec;

use super::kernel::{Block, BlockKernel, Map, Zip};
use super::{alloc, fresh, parallel};
use crate::error::Result;

/// An input of a flat walk: an array of the result's shape, or a rank-0 array read for every
/// index.
pub(crate) struct FlatSrc<'a, T> {
    ptr: *const T,
    /// Shape and strides of an input of the result's shape; `None` for a rank-0 one.
    whole: Option<(&'a [usize], &'a [isize])>,
    _borrow: PhantomData<&'a T>,
}

impl<'a, T> FlatSrc<'a, T> {
    /// `a` read element by element (the walk checks that it has the result's shape).
    pub fn whole<D: Dimension>(a: &'a ArrayRef<T, D>) -> Self {
        FlatSrc {
            ptr: a.as_ptr(),
            whole: Some((a.shape(), a.strides())),
            _borrow: PhantomData,
        }
    }

    /// The one element of `a`, for every index, if `a` has rank 0.
    pub fn scalar<D: Dimension>(a: &'a ArrayRef<T, D>) -> Option<Self> {
        (a.ndim() == 0).then(|| FlatSrc {
            ptr: a.as_ptr(),
            whole: None,
            _borrow: PhantomData,
        })
    }

    /// Its stride in the one run: 1 along a contiguous array, 0 on a broadcast element.
    fn inner(&self) -> isize {
        match self.whole {
            Some(_) => 1,
            None => 0,
        }
    }
}

/// A memory order of a flat walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    C,
    F,
}

/// The orders, (C, F), that strides `strides` at `shape` are contiguous in with positive
/// strides (so element 0 is the lowest address). A size-1 dim takes any stride, so an array
/// with at most one dim longer than 1 is both.
#[inline(always)]
fn contiguity(shape: &[usize], strides: &[isize]) -> (bool, bool) {
    // One plain pass both ways (this runs on every small op: closures over `dyn Iterator` here
    // cost a third of a 4x4 op). No overflow: the array holds the product of its dims.
    let (mut c, mut f) = (true, true);
    let (mut c_step, mut f_step) = (1isize, 1isize);
    let rank = shape.len();
    for i in 0..rank {
        let (n, s) = (shape[i], strides[i]);
        if n != 1 {
            f &= s == f_step;
            f_step = f_step.wrapping_mul(n as isize);
        }
        let (n, s) = (shape[rank - 1 - i], strides[rank - 1 - i]);
        if n != 1 {
            c &= s == c_step;
            c_step = c_step.wrapping_mul(n as isize);
        }
    }
    (c, f)
}

/// The order in which a fresh result of `shape` is filled in one run from `inputs`: C when
/// every input of that shape is C-contiguous (ndarray's default) or there are no elements,
/// else F when every one is F-contiguous; `None` when an input has another shape or layout.
// Inlined, with the inputs by reference: passed as an array by value, they were stored and
// reloaded in wider pieces, a store-forwarding stall that took a quarter of a 4x4 add.
#[inline(always)]
fn order(shape: &[usize], inputs: &[Option<(&[usize], &[isize])>]) -> Option<Order> {
    let (mut c, mut f) = (true, true);
    for &(s, strides) in inputs.iter().flatten() {
        if s.len() != shape.len() || s.iter().zip(shape).any(|(x, y)| x != y) {
            return None;
        }
        if s.contains(&0) {
            return Some(Order::C); // nothing to read, and no memory order to follow
        }
        let (ci, fi) = contiguity(s, strides);
        (c, f) = (c && ci, f && fi);
    }
    match (c, f) {
        (true, _) => Some(Order::C),
        (false, true) => Some(Order::F),
        (false, false) => None,
    }
}

/// A fresh result of shape `dim` in `order`, filled by `kernel` as one run over all its
/// elements: the output first in `ptrs` (its slot there is replaced), the inputs after it,
/// moving by `inner`. Inlined, as is the allocation: a result passed up through calls was most
/// of the fixed cost.
///
/// # Safety
/// `kernel` writes output slots of `MaybeUninit<C>`; every input of `ptrs` holds an element of
/// the kernel's type at each of the run's offsets (`inner` 1: a contiguous array of the result's
/// size from its element 0; 0: one element), none inside the fresh output.
#[inline(always)]
unsafe fn one_run<C, O: Dimension, const N: usize>(
    op: &'static str,
    dim: O,
    order: Order,
    mut ptrs: [*mut u8; N],
    inner: [isize; N],
    kernel: &impl BlockKernel<N>,
) -> Result<Array<C, O>> {
    let out: Array<MaybeUninit<C>, O> = match order {
        Order::C => alloc::uninit(op, dim, None)?,
        Order::F => {
            let outer_first: SmallVec<[usize; 6]> = (0..dim.ndim()).rev().collect();
            alloc::uninit(op, dim, Some(&outer_first))?
        }
    };
    let walk = |out: &mut ArrayRef<MaybeUninit<C>, O>, log: Option<&fresh::FreshLog>| {
        if out.is_empty() {
            return;
        }
        // A fresh contiguous array with positive strides: its `len` elements from element 0.
        ptrs[0] = out.as_mut_ptr().cast();
        let block = Block {
            n: out.len(),
            inner,
            rows: 1,
            step: [0; N],
        };
        // SAFETY: the run is the whole fresh output (unique, this thread's) and, for the
        // inputs, as the caller promised.
        unsafe { fresh::call_logged(kernel, ptrs, block, log) }
    };
    // SAFETY: the one run covers every element of the fresh output, through `call_logged`.
    Ok(unsafe { fresh::fill(out, walk) })
}

/// `f(a[i], b[i])` into a fresh array of shape `dim`, as one run, when the walk is small (serial)
/// and `a` and `b` are laid out for it (see the module); `None`, having done nothing, otherwise.
#[inline(always)]
pub(crate) fn zip<A, B, C, O>(
    op: &'static str,
    dim: O,
    a: FlatSrc<'_, A>,
    b: FlatSrc<'_, B>,
    f: &(impl Fn(A, B) -> C + Sync),
) -> Option<Result<Array<C, O>>>
where
    A: Clone,
    B: Clone,
    O: Dimension,
{
    let width = size_of::<A>().max(size_of::<B>()).max(size_of::<C>());
    if !parallel::is_small(dim.size(), width) {
        return None;
    }
    let order = order(dim.slice(), &[a.whole, b.whole])?;
    let ptrs = [std::ptr::null_mut(), a.ptr as *mut u8, b.ptr as *mut u8];
    let inner = [1, a.inner(), b.inner()];
    let kernel = Zip::<MaybeUninit<C>, A, B, _>(f, PhantomData);
    // SAFETY: `a` and `b` as `order` checked them: each has the output's shape and is contiguous
    // from its element 0 with positive strides, or is the one element of a rank-0 array read
    // with stride 0.
    Some(unsafe { one_run(op, dim, order, ptrs, inner, &kernel) })
}

/// `f(a[i])` into a fresh array of `a`'s shape, as one run: [`zip`] for one input.
#[inline(always)]
pub(crate) fn map<A, C, D>(
    op: &'static str,
    a: &ArrayRef<A, D>,
    f: &(impl Fn(A) -> C + Sync),
) -> Option<Result<Array<C, D>>>
where
    A: Clone,
    D: Dimension,
{
    let width = size_of::<A>().max(size_of::<C>());
    if !parallel::is_small(a.len(), width) {
        return None;
    }
    let order = order(a.shape(), &[Some((a.shape(), a.strides()))])?;
    let kernel = Map::<MaybeUninit<C>, A, _>(f, PhantomData);
    let ptrs = [std::ptr::null_mut(), a.as_ptr() as *mut u8];
    // SAFETY: `a` as `order` checked it.
    Some(unsafe { one_run(op, a.raw_dim(), order, ptrs, [1, 1], &kernel) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr0, s, Array2, Array3, ShapeBuilder};

    #[test]
    fn contiguity_ignores_size_one_dims_and_wants_positive_strides() {
        assert_eq!(contiguity(&[3, 4], &[4, 1]), (true, false));
        assert_eq!(contiguity(&[3, 4], &[1, 3]), (false, true));
        assert_eq!(contiguity(&[1, 4], &[99, 1]), (true, true));
        assert_eq!(contiguity(&[4, 1], &[1, -7]), (true, true));
        assert_eq!(contiguity(&[3, 4], &[8, 2]), (false, false));
        assert_eq!(contiguity(&[3, 4], &[-4, 1]), (false, false));
        assert_eq!(contiguity(&[2, 3, 4], &[1, 2, 6]), (false, true));
        assert_eq!(contiguity(&[], &[]), (true, true));
    }

    /// The flat walk takes exactly the small cases it is for, and gives what the planned walk
    /// gives: values and memory order.
    #[test]
    fn takes_small_contiguous_walks_only() {
        let add = |a: i32, b: i32| a * 10 + b;
        let c = Array2::from_shape_fn((5, 7), |(i, j)| (i * 7 + j) as i32);
        let f = Array2::from_shape_fn((5, 7).f(), |(i, j)| (i * 3 + j) as i32);
        let s = arr0(4);
        let want = |x: &Array2<i32>, y: &Array2<i32>| {
            Array2::from_shape_fn((5, 7), |(i, j)| add(x[[i, j]], y[[i, j]]))
        };
        let dim = c.raw_dim();

        let r = zip("t", dim, FlatSrc::whole(&c), FlatSrc::whole(&c), &add)
            .unwrap()
            .unwrap();
        assert!(r.is_standard_layout());
        assert_eq!(r, want(&c, &c));
        let r = zip("t", dim, FlatSrc::whole(&f), FlatSrc::whole(&f), &add)
            .unwrap()
            .unwrap();
        assert!(r.t().is_standard_layout(), "F inputs, F result");
        assert_eq!(r, want(&f, &f));
        let r = zip(
            "t",
            dim,
            FlatSrc::scalar(&s).unwrap(),
            FlatSrc::whole(&f),
            &add,
        )
        .unwrap()
        .unwrap();
        assert!(r.t().is_standard_layout());
        assert_eq!(r, f.mapv(|v| add(4, v)));
        let r = zip(
            "t",
            dim,
            FlatSrc::whole(&c),
            FlatSrc::scalar(&s).unwrap(),
            &add,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r, c.mapv(|v| add(v, 4)));
        let r = map("t", &f.view(), &|v: i32| v - 1).unwrap().unwrap();
        assert!(r.t().is_standard_layout());
        assert_eq!(r, f.mapv(|v| v - 1));
        let x = Array3::from_shape_fn((2, 3, 4).f(), |(i, j, k)| (i + 2 * j + 6 * k) as i32);
        let r = map("t", &x, &|v: i32| v * 2).unwrap().unwrap();
        assert_eq!(r.strides(), &[1, 2, 6]);
        assert_eq!(r, x.mapv(|v| v * 2));

        // Not for it: mixed orders, gaps, negative strides, another shape, a large walk.
        let none = |a: FlatSrc<'_, i32>, b: FlatSrc<'_, i32>| zip("t", dim, a, b, &add).is_none();
        assert!(none(FlatSrc::whole(&c), FlatSrc::whole(&f)));
        let wide = Array2::from_shape_fn((5, 14), |(i, j)| (i + j) as i32);
        assert!(none(
            FlatSrc::whole(&wide.slice(s![.., ..;2])),
            FlatSrc::whole(&c)
        ));
        assert!(none(
            FlatSrc::whole(&c),
            FlatSrc::whole(&c.slice(s![..;-1, ..]))
        ));
        assert!(none(FlatSrc::whole(&wide), FlatSrc::whole(&c)));
        assert!(map("t", &c.slice(s![.., ..;-1]), &|v: i32| v).is_none());
        let big = Array2::<i32>::zeros((512, 512));
        let r = zip(
            "t",
            big.raw_dim(),
            FlatSrc::whole(&big),
            FlatSrc::whole(&big),
            &add,
        );
        assert!(
            r.is_none(),
            "large walks go to the planner, which splits them"
        );

        // Empty and rank-0 results.
        let e = Array2::<i32>::zeros((0, 3).f());
        let r = zip(
            "t",
            e.raw_dim(),
            FlatSrc::whole(&e),
            FlatSrc::scalar(&s).unwrap(),
            &add,
        );
        assert_eq!(r.unwrap().unwrap().shape(), &[0, 3]);
        let r = zip(
            "t",
            s.raw_dim(),
            FlatSrc::scalar(&s).unwrap(),
            FlatSrc::whole(&s),
            &add,
        );
        assert_eq!(r.unwrap().unwrap(), arr0(44));
    }
}
