//! Inner loops. Each is chosen per run by the operands' inner strides: unit strides become
//! slices (which the compiler vectorises), a stride-0 operand becomes a hoisted scalar, and
//! anything else takes the general strided loop.

use std::mem::MaybeUninit;
use std::slice;

/// Where a kernel puts a result: a fresh (uninitialised) slot, or an existing element.
pub(crate) trait Sink<C> {
    fn put(&mut self, v: C);
}

impl<C> Sink<C> for MaybeUninit<C> {
    #[inline(always)]
    fn put(&mut self, v: C) {
        self.write(v);
    }
}

impl<C> Sink<C> for C {
    #[inline(always)]
    fn put(&mut self, v: C) {
        *self = v;
    }
}

/// `o[i] = f(a[i])` for `n` elements.
///
/// # Safety
/// `n > 0`; for each `i < n`, `o + i*s[0]` and `a + i*s[1]` are valid elements, the written ones
/// distinct from each other and from every element read, and no other thread touches them.
#[inline(always)]
pub(crate) unsafe fn map_row<S: Sink<C>, A: Clone, C>(
    o: *mut S,
    a: *const A,
    n: usize,
    s: [isize; 2],
    f: &impl Fn(A) -> C,
) {
    match s {
        [1, 1] => {
            let (o, a) = (slice::from_raw_parts_mut(o, n), slice::from_raw_parts(a, n));
            for (o, a) in o.iter_mut().zip(a) {
                o.put(f(a.clone()));
            }
        }
        [1, 0] => {
            let a = &*a;
            for o in slice::from_raw_parts_mut(o, n) {
                o.put(f(a.clone()));
            }
        }
        [so, sa] => {
            for i in 0..n as isize {
                (*o.offset(i * so)).put(f((*a.offset(i * sa)).clone()));
            }
        }
    }
}

/// `o[i] = f(a[i], b[i])` for `n` elements.
///
/// # Safety
/// As [`map_row`], for the three operands.
#[inline(always)]
pub(crate) unsafe fn zip_row<S: Sink<C>, A: Clone, B: Clone, C>(
    o: *mut S,
    a: *const A,
    b: *const B,
    n: usize,
    s: [isize; 3],
    f: &impl Fn(A, B) -> C,
) {
    match s {
        [1, 1, 1] => {
            let o = slice::from_raw_parts_mut(o, n);
            let (a, b) = (slice::from_raw_parts(a, n), slice::from_raw_parts(b, n));
            for ((o, a), b) in o.iter_mut().zip(a).zip(b) {
                o.put(f(a.clone(), b.clone()));
            }
        }
        [1, 1, 0] => {
            let (o, a, b) = (
                slice::from_raw_parts_mut(o, n),
                slice::from_raw_parts(a, n),
                &*b,
            );
            for (o, a) in o.iter_mut().zip(a) {
                o.put(f(a.clone(), b.clone()));
            }
        }
        [1, 0, 1] => {
            let (o, a, b) = (
                slice::from_raw_parts_mut(o, n),
                &*a,
                slice::from_raw_parts(b, n),
            );
            for (o, b) in o.iter_mut().zip(b) {
                o.put(f(a.clone(), b.clone()));
            }
        }
        [so, sa, sb] => {
            for i in 0..n as isize {
                (*o.offset(i * so))
                    .put(f((*a.offset(i * sa)).clone(), (*b.offset(i * sb)).clone()));
            }
        }
    }
}

/// `o[i] = f(a[i], b[i], c[i])` for `n` elements.
///
/// # Safety
/// As [`map_row`], for the four operands.
#[inline(always)]
pub(crate) unsafe fn zip3_row<S: Sink<D>, A: Clone, B: Clone, C: Clone, D>(
    o: *mut S,
    a: *const A,
    b: *const B,
    c: *const C,
    n: usize,
    s: [isize; 4],
    f: &impl Fn(A, B, C) -> D,
) {
    if s == [1, 1, 1, 1] {
        let o = slice::from_raw_parts_mut(o, n);
        let (a, b, c) = (
            slice::from_raw_parts(a, n),
            slice::from_raw_parts(b, n),
            slice::from_raw_parts(c, n),
        );
        for (((o, a), b), c) in o.iter_mut().zip(a).zip(b).zip(c) {
            o.put(f(a.clone(), b.clone(), c.clone()));
        }
    } else {
        let [so, sa, sb, sc] = s;
        for i in 0..n as isize {
            (*o.offset(i * so)).put(f(
                (*a.offset(i * sa)).clone(),
                (*b.offset(i * sb)).clone(),
                (*c.offset(i * sc)).clone(),
            ));
        }
    }
}

/// `o[i] = f(o[i], b[i])` for `n` elements: in-place ops and accumulation (`s[0] == 0` folds
/// the whole run into one element).
///
/// # Safety
/// As [`map_row`]; `o` may repeat (stride 0) only when no other thread writes that element.
#[inline(always)]
pub(crate) unsafe fn update_row<A: Clone, B: Clone>(
    o: *mut A,
    b: *const B,
    n: usize,
    s: [isize; 2],
    f: &impl Fn(A, B) -> A,
) {
    match s {
        [1, 1] => {
            let (o, b) = (slice::from_raw_parts_mut(o, n), slice::from_raw_parts(b, n));
            for (o, b) in o.iter_mut().zip(b) {
                *o = f(o.clone(), b.clone());
            }
        }
        [1, 0] => {
            let b = &*b;
            for o in slice::from_raw_parts_mut(o, n) {
                *o = f(o.clone(), b.clone());
            }
        }
        [0, 1] => {
            let o = &mut *o;
            let mut acc = o.clone();
            for b in slice::from_raw_parts(b, n) {
                acc = f(acc, b.clone());
            }
            *o = acc;
        }
        [so, sb] => {
            for i in 0..n as isize {
                let o = &mut *o.offset(i * so);
                *o = f(o.clone(), (*b.offset(i * sb)).clone());
            }
        }
    }
}

/// Lanes of a contiguous fold: independent accumulators let the compiler vectorise a reduction
/// that would otherwise wait on one running value.
const LANES: usize = 16;

/// `o[i * s[0]] = f(o[i * s[0]], b[i * s[1]])` for `n` elements, as [`update_row`], but a run
/// folding a contiguous `b` into one element (`s == [0, 1]`) keeps [`LANES`] partial results
/// started at `identity` and combines them in a fixed order at the end.
///
/// # Safety
/// As [`update_row`].
#[inline(always)]
pub(crate) unsafe fn fold_row<A: Clone>(
    o: *mut A,
    b: *const A,
    n: usize,
    s: [isize; 2],
    identity: &A,
    f: &impl Fn(A, A) -> A,
) {
    if s != [0, 1] || n < 2 * LANES {
        return update_row(o, b, n, s, f);
    }
    let b = slice::from_raw_parts(b, n);
    let mut lanes: [A; LANES] = std::array::from_fn(|_| identity.clone());
    let chunks = b.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (l, x) in lanes.iter_mut().zip(chunk) {
            *l = f(l.clone(), x.clone());
        }
    }
    for (l, x) in lanes.iter_mut().zip(tail) {
        *l = f(l.clone(), x.clone());
    }
    let o = &mut *o;
    let mut acc = o.clone();
    for l in lanes {
        acc = f(acc, l);
    }
    *o = acc;
}
