//! The loop plan: which dims to walk, in which order, merged where every operand allows.

use std::ops::Range;

/// A loop nest over `N` operands seen at one shape (operand 0 is the one written).
///
/// Dims of size 1 are dropped, the rest are ordered by the strides of the operands (operand 0
/// first, so the written array is walked in memory order; stride-0 operands do not decide), and
/// adjacent dims that are contiguous in every operand are merged, so a contiguous array is one
/// long inner loop whatever its rank.
#[derive(Debug, Clone)]
pub(crate) struct Plan<const N: usize> {
    /// Merged dims, outermost first. Never empty: a scalar is one dim of length 1.
    pub dims: Vec<usize>,
    /// For each merged dim, the stride (in elements) of each operand.
    pub strides: Vec<[isize; N]>,
    /// Total number of elements.
    pub len: usize,
}

impl<const N: usize> Plan<N> {
    /// Plans a walk over `shape`; `strides[k]` are operand `k`'s strides at that shape and
    /// `priority` lists the operands whose strides decide the order, most important first.
    pub fn new(shape: &[usize], strides: [&[isize]; N], priority: &[usize]) -> Self {
        let len = shape.iter().product();
        if len == 0 {
            return Plan {
                dims: vec![0],
                strides: vec![[0; N]],
                len: 0,
            };
        }
        let mut axes: Vec<usize> = (0..shape.len()).filter(|&i| shape[i] != 1).collect();
        let key = |ax: usize| -> Vec<usize> {
            priority
                .iter()
                .map(|&k| strides[k][ax].unsigned_abs())
                .collect()
        };
        // Largest strides outermost; the stable sort keeps the logical order on ties.
        axes.sort_by_key(|&ax| std::cmp::Reverse(key(ax)));

        let mut dims: Vec<usize> = Vec::with_capacity(axes.len());
        let mut merged: Vec<[isize; N]> = Vec::with_capacity(axes.len());
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
            len,
        }
    }

    /// The strides of the innermost loop.
    pub fn inner_strides(&self) -> [isize; N] {
        *self.strides.last().expect("a plan has at least one dim")
    }

    /// Calls `row(offsets, n)` for each run of the innermost loop that falls in the linear
    /// element range `range` (row-major over the planned dims); `offsets` are each operand's
    /// element offset of the run's first element.
    pub fn for_each_run(&self, range: Range<usize>, mut row: impl FnMut([isize; N], usize)) {
        if range.is_empty() {
            return;
        }
        let outer = self.dims.len() - 1;
        let inner_len = self.dims[outer];
        let inner = self.strides[outer];
        let (mut row_no, mut col) = (range.start / inner_len, range.start % inner_len);
        // Multi-index of the current row over the outer dims, and its offsets.
        let mut idx = vec![0usize; outer];
        let mut base = [0isize; N];
        for d in (0..outer).rev() {
            idx[d] = row_no % self.dims[d];
            row_no /= self.dims[d];
            for (k, b) in base.iter_mut().enumerate() {
                *b += idx[d] as isize * self.strides[d][k];
            }
        }
        let mut remaining = range.len();
        loop {
            let n = (inner_len - col).min(remaining);
            let offs = std::array::from_fn(|k| base[k] + col as isize * inner[k]);
            row(offs, n);
            remaining -= n;
            if remaining == 0 {
                return;
            }
            col = 0;
            for d in (0..outer).rev() {
                idx[d] += 1;
                for (k, b) in base.iter_mut().enumerate() {
                    *b += self.strides[d][k];
                }
                if idx[d] < self.dims[d] {
                    break;
                }
                for (k, b) in base.iter_mut().enumerate() {
                    *b -= self.strides[d][k] * self.dims[d] as isize;
                }
                idx[d] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_merges_to_one_dim() {
        let p = Plan::<2>::new(&[4, 5, 6], [&[30, 6, 1], &[30, 6, 1]], &[0, 1]);
        assert_eq!(p.dims, vec![120]);
        assert_eq!(p.inner_strides(), [1, 1]);
    }

    #[test]
    fn broadcast_row_keeps_two_dims() {
        // (M,N) + (1,N): rhs stride 0 on dim 0 stops the merge.
        let p = Plan::<3>::new(&[3, 4], [&[4, 1], &[4, 1], &[0, 1]], &[0, 1, 2]);
        assert_eq!(p.dims, vec![3, 4]);
    }

    #[test]
    fn transposed_output_walks_memory_order() {
        let p = Plan::<2>::new(&[3, 4], [&[1, 3], &[4, 1]], &[0, 1]);
        assert_eq!(p.dims, vec![4, 3]);
        assert_eq!(p.inner_strides(), [1, 4]);
    }

    #[test]
    fn runs_cover_a_range_exactly() {
        let p = Plan::<1>::new(&[3, 4], [&[10, 1]], &[0]);
        let mut seen = vec![];
        p.for_each_run(2..11, |o, n| seen.push((o[0], n)));
        assert_eq!(seen, vec![(2, 2), (10, 4), (20, 3)]);
    }
}
