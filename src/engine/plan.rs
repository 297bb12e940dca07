//! The loop plan: which dims to walk, in which order, merged where every operand allows.

use std::ops::Range;

use smallvec::{smallvec, SmallVec};

use super::kernel::Block;

/// Inline storage for the loop nest: no allocation up to this many dims.
type Nest<T> = SmallVec<[T; 6]>;

/// A loop nest over `N` operands seen at one shape (operand 0 is the one written).
///
/// Dims of size 1 are dropped, the rest are ordered by the strides of the operands (operand 0
/// first, so the written array is walked in memory order; stride-0 operands do not decide), and
/// adjacent dims that are contiguous in every operand are merged, so a contiguous array is one
/// long inner loop whatever its rank.
#[derive(Debug, Clone)]
pub(crate) struct Plan<const N: usize> {
    /// Merged dims, outermost first. Never empty: a scalar is one dim of length 1.
    pub dims: Nest<usize>,
    /// For each merged dim, the stride (in elements) of each operand.
    pub strides: Nest<[isize; N]>,
    /// Total number of elements.
    pub len: usize,
}

impl<const N: usize> Plan<N> {
    /// Plans a walk over `shape`; `strides[k]` are operand `k`'s strides at that shape and
    /// `priority` orders the operands whose strides decide the loop order, most important first.
    pub fn new(shape: &[usize], strides: [&[isize]; N], priority: [usize; N]) -> Self {
        Self::over(shape, strides, sorted(shape, &strides, priority))
    }

    /// [`Plan::new`] for a fold in any order, operand 0 the accumulator: the dims in the
    /// source's memory order, but among the outer ones (all but the innermost) those the
    /// accumulator keeps go first, so that the dims it folds come together next to the block:
    /// its rows then fold pairwise into one accumulator run (`reduce::Walk`).
    pub fn folding(shape: &[usize], strides: [&[isize]; N], priority: [usize; N]) -> Self {
        let axes = sorted(shape, &strides, priority);
        let Some((&inner, outer)) = axes.split_last() else {
            return Self::over(shape, strides, axes);
        };
        let kept = outer.iter().filter(|&&ax| strides[0][ax] != 0);
        let folded = outer.iter().filter(|&&ax| strides[0][ax] == 0);
        let axes = kept.chain(folded).chain([&inner]).copied().collect();
        Self::over(shape, strides, axes)
    }

    /// Plans a walk over `shape` in its logical (row-major) order, whatever the strides: an
    /// element comes after every element with a smaller index, so a fold along the walk
    /// combines them in index order.
    pub fn logical(shape: &[usize], strides: [&[isize]; N]) -> Self {
        Self::over(shape, strides, long_dims(shape))
    }

    /// The walk over `axes` (the dims longer than 1, outermost first), merging neighbours that
    /// are contiguous in every operand.
    fn over(shape: &[usize], strides: [&[isize]; N], axes: Nest<usize>) -> Self {
        let len = shape.iter().product();
        if len == 0 {
            return Plan {
                dims: smallvec![0],
                strides: smallvec![[0; N]],
                len: 0,
            };
        }
        let mut plan = Plan {
            dims: SmallVec::new(),
            strides: SmallVec::new(),
            len,
        };
        merge(shape, &strides, &axes, &mut plan);
        if plan.dims.is_empty() {
            plan.dims.push(1);
            plan.strides.push([0; N]);
        }
        plan
    }

    /// Calls `block(offsets, block)` for the work in the linear element range `range`
    /// (row-major over the planned dims): the block's runs of the innermost loop, the first at
    /// `offsets` (each operand's element offset). Whole runs along the second-innermost dim
    /// come as one block; partial runs at the range's ends come alone.
    pub fn for_each_block(&self, range: Range<usize>, mut block: impl FnMut([isize; N], Block<N>)) {
        if range.is_empty() {
            return;
        }
        let (dims, strides): (&[usize], &[[isize; N]]) = (&self.dims, &self.strides);
        let outer = dims.len() - 1;
        let inner_len = dims[outer];
        let inner = strides[outer];
        let (mut row_no, mut col) = (range.start / inner_len, range.start % inner_len);
        // Multi-index of the current run over the outer dims, and its offsets.
        let mut idx: Nest<usize> = smallvec![0; outer];
        let idx: &mut [usize] = &mut idx;
        let mut base = [0isize; N];
        for d in (0..outer).rev() {
            idx[d] = row_no % dims[d];
            row_no /= dims[d];
            for k in 0..N {
                base[k] += idx[d] as isize * strides[d][k];
            }
        }
        let mut remaining = range.len();
        while remaining > 0 {
            // Whole runs left along the second-innermost dim, taken in one block.
            let (rows, step) = match outer.checked_sub(1) {
                Some(d) if col == 0 && remaining >= inner_len => {
                    ((dims[d] - idx[d]).min(remaining / inner_len), strides[d])
                }
                _ => (1, [0; N]),
            };
            let n = (inner_len - col).min(remaining);
            let mut at = base;
            for (a, s) in at.iter_mut().zip(inner) {
                *a += col as isize * s;
            }
            let run = Block {
                n,
                inner,
                rows,
                step,
            };
            block(at, run);
            remaining -= n * rows;
            col = 0;
            // Advance `rows` runs: the first step may land inside the second-innermost dim,
            // the carry then runs outward.
            let mut d = outer;
            let mut by = rows;
            while d > 0 && remaining > 0 {
                d -= 1;
                idx[d] += by;
                if idx[d] < dims[d] {
                    for k in 0..N {
                        base[k] += strides[d][k] * by as isize;
                    }
                    break;
                }
                for k in 0..N {
                    base[k] -= strides[d][k] * (idx[d] - by) as isize;
                }
                idx[d] = 0;
                by = 1;
            }
        }
    }
}

/// The dims of `shape` longer than 1, ordered by the strides of the operands in `priority`
/// order (largest outermost, the logical order kept on ties).
fn sorted<const N: usize>(
    shape: &[usize],
    strides: &[&[isize]; N],
    priority: [usize; N],
) -> Nest<usize> {
    let mut axes = long_dims(shape);
    let key = |ax: usize| {
        let mut key = [0; N];
        for (j, &k) in priority.iter().enumerate() {
            key[j] = strides[k][ax].unsigned_abs();
        }
        key
    };
    // Largest strides outermost, the logical order kept on ties: an insertion sort, stable,
    // free on arrays already in order, and a few lines where the library's sort is a
    // thousand per operand count (a walk has a handful of dims).
    for i in 1..axes.len() {
        let mut j = i;
        while j > 0 && key(axes[j - 1]) < key(axes[j]) {
            axes.swap(j - 1, j);
            j -= 1;
        }
    }
    axes
}

/// The dims of `shape` longer than 1, in order.
fn long_dims(shape: &[usize]) -> Nest<usize> {
    let mut dims = Nest::new();
    for (d, &n) in shape.iter().enumerate() {
        if n != 1 {
            dims.push(d);
        }
    }
    dims
}

/// The planner's one merging routine: walks `axes` (dims longer than 1, outermost first) into
/// `plan`, a dim joining the one outside it when it is contiguous with it in every operand, so
/// a contiguous array is one dim whatever its rank.
fn merge<const N: usize>(
    shape: &[usize],
    strides: &[&[isize]; N],
    axes: &[usize],
    plan: &mut Plan<N>,
) {
    for &ax in axes {
        let mut s = [0; N];
        for (s, strides) in s.iter_mut().zip(strides) {
            *s = strides[ax];
        }
        let n = shape[ax];
        if let (Some(outer_len), Some(outer)) = (plan.dims.last_mut(), plan.strides.last_mut()) {
            let mut joins = true;
            for k in 0..N {
                joins &= outer[k] == s[k] * n as isize;
            }
            if joins {
                *outer_len *= n;
                *outer = s;
                continue;
            }
        }
        plan.dims.push(n);
        plan.strides.push(s);
    }
}

/// A memory order of a shape's dims, outermost first. The two orders nearly every array has
/// are plain tags: a [`Nest`] returned is copied out through the stack, and that copy stalled
/// on its own stores (a fifth of an F-ordered 4x4 add).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order<P = Nest<usize>> {
    /// The logical order: standard (C) layout.
    Standard,
    /// The dims reversed: F layout.
    Reversed,
    /// Any other permutation of the dims.
    Dims(P),
}

impl Order {
    /// The order, borrowed.
    #[inline(always)]
    pub fn as_ref(&self) -> Order<&[usize]> {
        match self {
            Order::Standard => Order::Standard,
            Order::Reversed => Order::Reversed,
            Order::Dims(dims) => Order::Dims(dims),
        }
    }
}

impl Order<&[usize]> {
    /// The dim `i`-th from the outside, of `rank` dims.
    #[inline(always)]
    pub fn outer(&self, i: usize, rank: usize) -> usize {
        match self {
            Order::Standard => i,
            Order::Reversed => rank - 1 - i,
            Order::Dims(dims) => dims[i],
        }
    }
}

/// The memory order of a fresh output read by `inputs` (their strides at the output's
/// `shape`), after NumPy's `order='K'`: [`memory_order`], whose sort only the inputs that are
/// neither C- nor F-ordered reach. All-F inputs give an F-ordered result, as ndarray's own
/// arithmetic does, so the walk stays unit-stride instead of transposing every operand.
#[inline(always)]
pub(crate) fn output_order(shape: &[usize], inputs: &[&[isize]]) -> Order {
    // Strides that never grow from the outermost dim in: the logical order, which C-ordered
    // and broadcast inputs always give.
    let c_ordered = |strides: &[isize]| {
        let mut outer = usize::MAX;
        for (&n, &s) in shape.iter().zip(strides) {
            let s = order_stride(n, s);
            if s != 0 {
                if s > outer {
                    return false;
                }
                outer = s;
            }
        }
        true
    };
    // Strides that grow from the first dim to the last, in every input that is not a scalar,
    // with no size-1 dim: every pair of dims is told apart the same way, and the sort would
    // reverse them all.
    let f_ordered = |strides: &[isize]| {
        let mut inner = 0;
        strides.iter().all(|&s| s == 0)
            || strides.iter().all(|&s| {
                let grows = s.unsigned_abs() > inner;
                inner = s.unsigned_abs();
                grows
            })
    };
    // An empty result has no memory to order.
    if inputs.iter().all(|s| c_ordered(s)) || shape.contains(&0) {
        Order::Standard
    } else if !shape.contains(&1) && inputs.iter().all(|s| f_ordered(s)) {
        Order::Reversed
    } else {
        memory_order(shape, inputs).map_or(Order::Standard, Order::Dims)
    }
}

/// What an input's stride `s` along a dim of size `n` says about memory order: its size, or 0
/// for nothing (a size-1 dim has no order to follow; a broadcast, stride 0, none either).
#[inline(always)]
fn order_stride(n: usize, s: isize) -> usize {
    if n == 1 {
        0
    } else {
        s.unsigned_abs()
    }
}

/// Whether `strides` at `shape` lay the elements out densely, with positive strides, in
/// `order`, so that element 0 is the lowest address and the elements follow one another in
/// that order. Size-1 dims take any stride.
#[inline(always)]
pub(crate) fn dense_in(shape: &[usize], strides: &[isize], order: Order<&[usize]>) -> bool {
    let rank = shape.len();
    let mut step = 1isize;
    for i in (0..rank).rev() {
        let d = order.outer(i, rank);
        if shape[d] != 1 {
            if strides[d] != step {
                return false;
            }
            // No overflow: the array holds the product of its dims.
            step = step.wrapping_mul(shape[d] as isize);
        }
    }
    true
}

/// The memory order (dims, outermost first) that the strides `inputs` (at `shape`) agree on:
/// a dim goes outside another when every input that tells the two apart (both strides nonzero,
/// both dims longer than 1) has the larger stride on it; otherwise the logical order stands.
/// `None` when that is the logical order. The engine's one reading of strides as a memory
/// order: fresh outputs follow it, and [`crate::layout::layout_of`] reads layouts with it.
#[inline(never)]
pub(crate) fn memory_order(shape: &[usize], inputs: &[&[isize]]) -> Option<Nest<usize>> {
    let stride = |k: usize, ax: usize| order_stride(shape[ax], inputs[k][ax]);
    let mut order: Nest<usize> = SmallVec::new();
    for ax in 0..shape.len() {
        let mut at = order.len();
        for j in (0..order.len()).rev() {
            // (inputs that tell the two dims apart, those of them that put `ax` outside)
            let (told, outside) = (0..inputs.len())
                .map(|k| (stride(k, order[j]), stride(k, ax)))
                .filter(|&(outer, inner)| outer != 0 && inner != 0)
                .fold((0, 0), |(t, o), (outer, inner)| {
                    (t + 1, o + usize::from(inner > outer))
                });
            match (told, outside) {
                (0, _) => continue,
                (t, o) if t == o => at = j,
                _ => break,
            }
        }
        order.insert(at, ax);
    }
    (!order.iter().copied().eq(0..shape.len())).then_some(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<const N: usize> Plan<N> {
        /// Calls `run(offsets, n)` for each run of the innermost loop in `range`.
        fn for_each_run(&self, range: Range<usize>, mut run: impl FnMut([isize; N], usize)) {
            self.for_each_block(range, |offs, b| {
                for r in 0..b.rows as isize {
                    run(std::array::from_fn(|k| offs[k] + r * b.step[k]), b.n);
                }
            });
        }
    }

    #[test]
    fn contiguous_merges_to_one_dim() {
        let p = Plan::<2>::new(&[4, 5, 6], [&[30, 6, 1], &[30, 6, 1]], [0, 1]);
        assert_eq!(p.dims.as_slice(), &[120]);
        assert_eq!(p.strides[p.strides.len() - 1], [1, 1]);
    }

    #[test]
    fn broadcast_row_keeps_two_dims() {
        // (M,N) + (1,N): rhs stride 0 on dim 0 stops the merge.
        let p = Plan::<3>::new(&[3, 4], [&[4, 1], &[4, 1], &[0, 1]], [0, 1, 2]);
        assert_eq!(p.dims.as_slice(), &[3, 4]);
    }

    #[test]
    fn transposed_output_walks_memory_order() {
        let p = Plan::<2>::new(&[3, 4], [&[1, 3], &[4, 1]], [0, 1]);
        assert_eq!(p.dims.as_slice(), &[4, 3]);
        assert_eq!(p.strides[p.strides.len() - 1], [1, 4]);
    }

    /// `order` as [`memory_order`] gives it: the dims outermost first, `None` for the logical
    /// order.
    fn dims(shape: &[usize], order: Order) -> Option<Vec<usize>> {
        let rank = shape.len();
        let dims = (0..rank)
            .map(|i| order.as_ref().outer(i, rank))
            .collect::<Vec<_>>();
        (order != Order::Standard).then_some(dims)
    }

    #[test]
    fn output_order_follows_the_inputs() {
        let order = |shape: &[usize], inputs: &[&[isize]]| dims(shape, output_order(shape, inputs));
        // C order, broadcast and size-1 dims, empty results: standard layout, no sort.
        assert_eq!(order(&[0, 4], &[&[1, 3]]), None);
        assert_eq!(order(&[3, 4], &[&[4, 1], &[0, 1]]), None);
        assert_eq!(order(&[3, 1, 4], &[&[4, 99, 1]]), None);
        // All-F inputs, also with a broadcast row: F order.
        assert_eq!(order(&[3, 4], &[&[1, 3], &[1, 3]]), Some(vec![1, 0]));
        assert_eq!(order(&[3, 4], &[&[1, 3], &[0, 1]]), Some(vec![1, 0]));
        // Reversed strides count by size.
        assert_eq!(order(&[3, 4], &[&[-1, -3]]), Some(vec![1, 0]));
        // Inputs that disagree keep the logical order.
        assert_eq!(order(&[3, 4], &[&[1, 3], &[4, 1]]), None);
        // Rank 3: any permutation is followed; an ambiguous pair is stepped over.
        assert_eq!(order(&[2, 3, 4], &[&[1, 2, 6]]), Some(vec![2, 1, 0]));
        assert_eq!(order(&[2, 3, 4], &[&[4, 1, 12]]), Some(vec![2, 0, 1]));
        assert_eq!(
            order(&[2, 3, 4], &[&[1, 0, 2], &[0, 1, 0]]),
            Some(vec![2, 0, 1])
        );
    }

    /// The shortcuts before the sort (C order, F order) answer as the sort would, for every
    /// small shape and every stride pattern of one or two inputs.
    #[test]
    fn output_order_is_the_sorts_order() {
        let values = [0isize, 1, 2, 6, -4];
        for rank in 1..=3u32 {
            let patterns: Vec<Vec<isize>> = (0..values.len().pow(rank))
                .map(|code| {
                    (0..rank as usize)
                        .map(|d| values[code / values.len().pow(d as u32) % values.len()])
                        .collect()
                })
                .collect();
            for code in 0..3usize.pow(rank) {
                let shape: Vec<usize> = (0..rank).map(|d| 1 + code / 3usize.pow(d) % 3).collect();
                for x in &patterns {
                    let sorted =
                        |inputs: &[&[isize]]| memory_order(&shape, inputs).map(|o| o.to_vec());
                    assert_eq!(dims(&shape, output_order(&shape, &[x])), sorted(&[x]));
                    for y in &patterns {
                        let inputs: [&[isize]; 2] = [x, y];
                        let got = dims(&shape, output_order(&shape, &inputs));
                        let want = sorted(&inputs);
                        assert_eq!(got, want, "{shape:?} {x:?} {y:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn runs_cover_a_range_exactly() {
        let p = Plan::<1>::new(&[3, 4], [&[10, 1]], [0]);
        let mut seen = vec![];
        p.for_each_run(2..11, |o, n| seen.push((o[0], n)));
        assert_eq!(seen, vec![(2, 2), (10, 4), (20, 3)]);
    }

    /// Walks a plan over `shape` for a standard-layout output and an input with strides
    /// `input`, cut into `pieces` ranges as the parallel split cuts it, checking that every
    /// output element comes once, with its input element.
    fn check_walk(shape: &[usize], input: &[isize], pieces: usize) {
        let out: Vec<isize> = (0..shape.len())
            .map(|d| shape[d + 1..].iter().product::<usize>() as isize)
            .collect();
        let len: usize = shape.iter().product();
        let plan = Plan::<2>::new(shape, [&out, input], [0, 1]);
        assert_eq!(plan.len, len);
        let mut seen = vec![0u8; len];
        let inner = plan.strides[plan.strides.len() - 1];
        for i in 0..pieces {
            let range = crate::engine::parallel::share(len, pieces, 64, i);
            plan.for_each_run(range, |o, n| {
                for i in 0..n as isize {
                    let (at, read) = (o[0] + i * inner[0], o[1] + i * inner[1]);
                    let want: isize = (0..shape.len())
                        .map(|d| (at / out[d]) % shape[d] as isize * input[d])
                        .sum();
                    assert_eq!(read, want);
                    seen[at as usize] += 1;
                }
            });
        }
        assert!(seen.iter().all(|&c| c == 1));
    }

    #[test]
    fn split_walks_cover_every_element_once() {
        for pieces in [1, 2, 3, 7] {
            check_walk(&[300, 290], &[1, 300], pieces);
            check_walk(&[5, 3, 70], &[1, 5, 15], pieces);
            check_walk(&[4, 1, 6], &[0, 0, 1], pieces);
            check_walk(&[9, 13], &[13, 1], pieces);
        }
    }

    #[test]
    fn density_follows_an_order() {
        assert!(dense_in(&[3, 4], &[4, 1], Order::Standard));
        assert!(!dense_in(&[3, 4], &[1, 3], Order::Standard));
        assert!(dense_in(&[3, 4], &[1, 3], Order::Dims(&[1, 0])));
        assert!(dense_in(&[3, 4], &[1, 3], Order::Reversed));
        assert!(!dense_in(&[3, 4], &[4, 1], Order::Reversed));
        assert!(
            dense_in(&[1, 4], &[99, 1], Order::Standard),
            "size-1 dims take any stride"
        );
        assert!(!dense_in(&[3, 4], &[8, 2], Order::Standard));
        assert!(!dense_in(&[3, 4], &[-4, 1], Order::Standard));
        assert!(dense_in(&[2, 3, 4], &[4, 8, 1], Order::Dims(&[1, 0, 2])));
        assert!(dense_in(&[], &[], Order::Standard));
    }
}
