//! The loop plan: which dims to walk, in which order, merged where every operand allows.

use std::ops::Range;

use smallvec::{smallvec, SmallVec};

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
    /// Each operand's element offset of the plan's first element.
    pub base: [isize; N],
    /// Total number of elements.
    pub len: usize,
}

/// The largest tile edge, in elements, of a transposing walk (see [`Plan::tiled`]).
pub(super) const TILE: usize = 256;

/// The smallest; an operand's stride across the inner loop must be as large. Below it no
/// tiles are needed: the lines a block reads across its rows stay in cache from one run to
/// the next, and the engine stages such an operand slab by slab either way.
pub(super) const MIN_TILE: usize = 128;

/// Whether an operand that moves by `along` in one loop and by `inner` in the inner loop is
/// read across its rows there (a transpose worth a tile): unit stride along, at least
/// [`MIN_TILE`] across.
pub(super) fn reads_across(along: isize, inner: isize) -> bool {
    along.unsigned_abs() == 1 && inner.unsigned_abs() >= MIN_TILE
}

/// Tile rows come in multiples of this (the staging slab), tile columns in multiples of
/// [`COL_MULTIPLE`] (the register transposes' blocks).
pub(super) const ROW_MULTIPLE: usize = 16;
pub(super) const COL_MULTIPLE: usize = 8;

/// The edge of the tiles along a dim of `n >= MIN_TILE` elements: `n` cut into as few pieces
/// of at most [`TILE`] as possible, rounded down to `multiple`, so edge strips stay thin.
fn tile_edge(n: usize, multiple: usize) -> usize {
    n / n.div_ceil(TILE) / multiple * multiple
}

impl<const N: usize> Plan<N> {
    /// Plans a walk over `shape`; `strides[k]` are operand `k`'s strides at that shape and
    /// `priority` orders the operands whose strides decide the loop order, most important first.
    pub fn new(shape: &[usize], strides: [&[isize]; N], priority: [usize; N]) -> Self {
        let mut axes: Nest<usize> = (0..shape.len()).filter(|&i| shape[i] != 1).collect();
        let key = |ax: usize| -> [usize; N] { priority.map(|k| strides[k][ax].unsigned_abs()) };
        // Largest strides outermost; the stable sort keeps the logical order on ties. Arrays in
        // standard layout are already in order, and small ops should not pay for a sort.
        if axes.windows(2).any(|w| key(w[0]) < key(w[1])) {
            axes.sort_by_key(|&ax| std::cmp::Reverse(key(ax)));
        }
        Self::over(shape, strides, axes)
    }

    /// Plans a walk over `shape` in its logical (row-major) order, whatever the strides: an
    /// element comes after every element with a smaller index, so a fold along the walk
    /// combines them in index order.
    pub fn logical(shape: &[usize], strides: [&[isize]; N]) -> Self {
        Self::over(
            shape,
            strides,
            (0..shape.len()).filter(|&i| shape[i] != 1).collect(),
        )
    }

    /// The walk over `axes` (the dims longer than 1, outermost first), merging neighbours that
    /// are contiguous in every operand.
    fn over(shape: &[usize], strides: [&[isize]; N], axes: Nest<usize>) -> Self {
        let len = shape.iter().product();
        if len == 0 {
            return Plan {
                dims: smallvec![0],
                strides: smallvec![[0; N]],
                base: [0; N],
                len: 0,
            };
        }
        let mut dims: Nest<usize> = SmallVec::new();
        let mut merged: Nest<[isize; N]> = SmallVec::new();
        for ax in axes {
            let s: [isize; N] = std::array::from_fn(|k| strides[k][ax]);
            let n = shape[ax];
            if let (Some(outer_len), Some(outer)) = (dims.last_mut(), merged.last_mut()) {
                if (0..N).all(|k| outer[k] == s[k] * n as isize) {
                    *outer_len *= n;
                    *outer = s;
                    continue;
                }
            }
            dims.push(n);
            merged.push(s);
        }
        if dims.is_empty() {
            dims.push(1);
            merged.push([0; N]);
        }
        Plan {
            dims,
            strides: merged,
            base: [0; N],
            len,
        }
    }

    /// The same walk cut into tiles (at most [`TILE`] square; their last two dims are a tile's
    /// rows and columns) when an operand runs across the inner loop with a large stride but
    /// along another loop with unit stride (a transpose): walking a tile reuses the cache lines
    /// and pages such an operand touches. That other loop is moved next to the inner one (a
    /// permutation of rank 3 or more can put it further out). Returns the tiled part and the
    /// edge strips, or `None` when tiling does not apply. Elementwise results do not depend on
    /// the order of the walk, so the tiled plans compute exactly what the plain one does.
    pub fn tiled(&self) -> Option<Vec<Plan<N>>> {
        let k = self.dims.len();
        if k < 2 || self.dims[k - 1] < MIN_TILE {
            return None;
        }
        let si = self.strides[k - 1];
        let along = (0..k - 1).rev().find(|&d| {
            self.dims[d] >= MIN_TILE && (0..N).any(|j| reads_across(self.strides[d][j], si[j]))
        })?;
        let (mut dims, mut strides) = (self.dims.clone(), self.strides.clone());
        let n = dims.remove(along);
        dims.insert(k - 2, n);
        let s = strides.remove(along);
        strides.insert(k - 2, s);

        let (outer, inner) = (k - 2, k - 1);
        let (rows, cols) = (dims[outer], dims[inner]);
        let (so, si) = (strides[outer], strides[inner]);
        let (tr, tc) = (tile_edge(rows, ROW_MULTIPLE), tile_edge(cols, COL_MULTIPLE));
        let (r0, c0) = (rows / tr * tr, cols / tc * tc);
        let head = &dims[..outer];
        let head_strides = &strides[..outer];
        let part = |dims: Nest<usize>, strides: Nest<[isize; N]>, shift: [isize; N]| Plan {
            len: dims.iter().product(),
            dims,
            strides,
            base: std::array::from_fn(|j| self.base[j] + shift[j]),
        };
        let scaled = |s: [isize; N], by: usize| s.map(|x| x * by as isize);
        let mut plans = vec![part(
            head.iter()
                .copied()
                .chain([r0 / tr, c0 / tc, tr, tc])
                .collect(),
            head_strides
                .iter()
                .copied()
                .chain([scaled(so, tr), scaled(si, tc), so, si])
                .collect(),
            [0; N],
        )];
        if c0 < cols {
            plans.push(part(
                head.iter().copied().chain([rows, cols - c0]).collect(),
                head_strides.iter().copied().chain([so, si]).collect(),
                scaled(si, c0),
            ));
        }
        if r0 < rows {
            plans.push(part(
                head.iter().copied().chain([rows - r0, c0]).collect(),
                head_strides.iter().copied().chain([so, si]).collect(),
                scaled(so, r0),
            ));
        }
        Some(plans)
    }

    /// The strides of the innermost loop.
    pub fn inner_strides(&self) -> [isize; N] {
        *self.strides.last().expect("a plan has at least one dim")
    }

    /// Calls `block(offsets, rows, step)` for the work in the linear element range `range`
    /// (row-major over the planned dims): `rows` runs of the innermost loop, the first at
    /// `offsets` (each operand's element offset), each next one `step` further. Whole runs along
    /// the second-innermost dim come as one block; partial runs at the range's ends come alone,
    /// with their length as `n`.
    pub fn for_each_block(
        &self,
        range: Range<usize>,
        mut block: impl FnMut([isize; N], usize, usize, [isize; N]),
    ) {
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
        let mut base = self.base;
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
            block(
                std::array::from_fn(|k| base[k] + col as isize * inner[k]),
                n,
                rows,
                step,
            );
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

    /// Calls `run(offsets, n)` for each run of the innermost loop in `range`.
    pub fn for_each_run(&self, range: Range<usize>, mut run: impl FnMut([isize; N], usize)) {
        self.for_each_block(range, |offs, n, rows, step| {
            for r in 0..rows as isize {
                run(std::array::from_fn(|k| offs[k] + r * step[k]), n);
            }
        });
    }
}

/// The memory order (dims, outermost first) of a fresh output read by `inputs` (their strides
/// at the output's `shape`), after NumPy's `order='K'`: a dim goes outside another when every
/// input that tells the two apart has the larger stride on it; otherwise the logical order
/// stands. `None` means the logical order (standard layout), which C-ordered and broadcast
/// inputs always give without a sort. All-F inputs give an F-ordered result, as ndarray's own
/// arithmetic does, so the walk stays unit-stride instead of transposing every operand.
#[inline]
pub(crate) fn output_order(shape: &[usize], inputs: &[&[isize]]) -> Option<Nest<usize>> {
    // Plain loops, inlined: every small op passes here.
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
    // An empty result has no memory to order.
    if inputs.iter().all(|s| c_ordered(s)) || shape.contains(&0) {
        return None;
    }
    sorted_order(shape, inputs)
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

/// [`output_order`] for inputs that are not all C-ordered: an insertion sort of the dims.
#[inline(never)]
fn sorted_order(shape: &[usize], inputs: &[&[isize]]) -> Option<Nest<usize>> {
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

    #[test]
    fn contiguous_merges_to_one_dim() {
        let p = Plan::<2>::new(&[4, 5, 6], [&[30, 6, 1], &[30, 6, 1]], [0, 1]);
        assert_eq!(p.dims.as_slice(), &[120]);
        assert_eq!(p.inner_strides(), [1, 1]);
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
        assert_eq!(p.inner_strides(), [1, 4]);
    }

    #[test]
    fn output_order_follows_the_inputs() {
        let order =
            |shape: &[usize], inputs: &[&[isize]]| output_order(shape, inputs).map(|o| o.to_vec());
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

    #[test]
    fn runs_cover_a_range_exactly() {
        let p = Plan::<1>::new(&[3, 4], [&[10, 1]], [0]);
        let mut seen = vec![];
        p.for_each_run(2..11, |o, n| seen.push((o[0], n)));
        assert_eq!(seen, vec![(2, 2), (10, 4), (20, 3)]);
    }

    /// Walks the tiles of a plan over `shape` for a standard-layout output and an input with
    /// strides `input`, checking that every output element comes once, with its input element.
    fn check_tiles(shape: &[usize], input: &[isize]) -> usize {
        let out: Vec<isize> = (0..shape.len())
            .map(|d| shape[d + 1..].iter().product::<usize>() as isize)
            .collect();
        let len: usize = shape.iter().product();
        let tiles = Plan::<2>::new(shape, [&out, input], [0, 1])
            .tiled()
            .expect("a transpose tiles");
        assert_eq!(tiles.iter().map(|t| t.len).sum::<usize>(), len);
        let mut seen = vec![0u8; len];
        for t in &tiles {
            let inner = t.inner_strides();
            t.for_each_run(0..t.len, |o, n| {
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
        tiles.len()
    }

    #[test]
    fn tiles_cover_every_element_once() {
        // A transpose with edges: out row-major, input column-major.
        let (r, c) = (2 * TILE + 6, TILE + 13);
        assert_eq!(check_tiles(&[r, c], &[1, r as isize]), 3);
        // Rank 3, reversed axes: the input's unit-stride dim is the outermost one.
        let (a, b, c) = (TILE + 4, 3, TILE + 14);
        let reversed = [1, a as isize, (a * b) as isize];
        assert_eq!(check_tiles(&[a, b, c], &reversed), 3);
        // Dims that do not cut into whole tiles: tiles of at most TILE, edges thinner than
        // a tile; the smallest dims that tile, in one tile or one tile and edges.
        assert_eq!(check_tiles(&[300, 290], &[1, 300]), 3);
        assert_eq!(
            check_tiles(&[MIN_TILE, MIN_TILE], &[1, MIN_TILE as isize]),
            1
        );
        assert_eq!(check_tiles(&[MIN_TILE + 9, MIN_TILE + 3], &[1, 137]), 3);
        assert_eq!(tile_edge(4096, ROW_MULTIPLE), TILE);
        assert_eq!(tile_edge(300, ROW_MULTIPLE), 144);
        assert_eq!(tile_edge(300, COL_MULTIPLE), 144);
        assert_eq!(tile_edge(MIN_TILE + 9, COL_MULTIPLE), MIN_TILE + 8);
        // Dims below MIN_TILE are not tiled (their blocks stage without tiles).
        let small = Plan::<2>::new(&[MIN_TILE - 1, 200], [&[200, 1], &[1, 127]], [0, 1]);
        assert!(small.tiled().is_none());
        // No transpose, no tiles.
        let standard = [c as isize, 1];
        assert!(Plan::<2>::new(&[r, c], [&standard, &standard], [0, 1])
            .tiled()
            .is_none());
    }
}
