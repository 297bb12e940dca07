//! The loops over one run of a zip (the last reduced dim of a fold, or of a group): a fold in
//! lanes ([`RunFold`]) and a map into operand 0 ([`RunMap`]). Each element's work is a step
//! ([`FoldStep`], [`MapStep`]): a struct whose method calls the user's closure, so that the
//! closure is inlined into the loop's AVX2 and FMA copy.
//!
//! The chunk loop is written out in both, not shared through a helper taking a closure: one
//! closure deeper, the compiler does not inline the user's closure into the AVX2 and FMA copy,
//! and `math`'s `mul_add`s become libm calls (a softmax 20x slower; `docs/experiments.md`,
//! "Fused loops").

use std::marker::PhantomData;

use super::fold::{pairwise, Lanes, LANES};
use crate::engine::{self, ApplyWith, CHUNK};

/// One element's step of a fold: the accumulator, operand 0's element `o` (the output of a
/// group, a stand-in elsewhere) and the operands' items.
pub(crate) trait FoldStep<Acc, Items>: Sync {
    /// The size of operand 0's elements, 0 if the step does not use them.
    const SIZE: usize;
    /// # Safety
    /// `o` is an element of operand 0 and this thread's alone, if the step uses it.
    unsafe fn step(&self, acc: Acc, o: *mut u8, items: Items) -> Acc;
}

/// A fold of the items alone: `f(acc, items...)`.
pub(crate) struct Items<F>(pub F);

impl<Acc, I, F: ApplyWith<Acc, I, Out = Acc> + Sync> FoldStep<Acc, I> for Items<F> {
    const SIZE: usize = 0;
    #[inline(always)]
    unsafe fn step(&self, acc: Acc, _: *mut u8, items: I) -> Acc {
        self.0.apply_with(acc, items)
    }
}

/// A fold that also gets the output element: `f(acc, &mut out, items...)`.
pub(crate) struct WithOut<F, R>(pub F, pub PhantomData<fn(R)>);

impl<Acc, R, I, F> FoldStep<Acc, I> for WithOut<F, R>
where
    F: for<'o> ApplyOut<Acc, &'o mut R, I, Out = Acc> + Sync,
{
    const SIZE: usize = size_of::<R>();
    #[inline(always)]
    unsafe fn step(&self, acc: Acc, o: *mut u8, items: I) -> Acc {
        // SAFETY: an element of the output, this thread's alone, as the caller promised.
        self.0.apply_out(acc, unsafe { &mut *o.cast::<R>() }, items)
    }
}

/// One element's step of a map into operand 0: its element `o` and the operands' items.
pub(crate) trait MapStep<R, Items>: Sync {
    fn step(&self, o: &mut R, items: Items);
}

/// `f(&mut o, items...)`: a group's `for_each`.
pub(crate) struct Update<F>(pub F);

/// `f(x, o, items...)`: a fold step's call of the user's closure.
pub(crate) trait ApplyOut<X, O, Items> {
    type Out;
    fn apply_out(&self, x: X, o: O, items: Items) -> Self::Out;
}

/// [`ApplyOut`] of a closure, and [`MapStep`] of [`Update`], for each tuple size.
macro_rules! steps {
    ($(($($P:ident $p:ident),+);)*) => {$(
        impl<F: Fn(X, O, $($P),+) -> T, X, O, T, $($P),+> ApplyOut<X, O, ($($P,)+)> for F {
            type Out = T;
            #[inline(always)]
            fn apply_out(&self, x: X, o: O, ($($p,)+): ($($P,)+)) -> T {
                self(x, o, $($p),+)
            }
        }
        impl<F: Fn(&mut R, $($P),+) + Sync, R, $($P),+> MapStep<R, ($($P,)+)> for Update<F> {
            #[inline(always)]
            fn step(&self, o: &mut R, ($($p,)+): ($($P,)+)) {
                (self.0)(o, $($p),+)
            }
        }
    )*};
}
steps! {
    (P1 p1);
    (P1 p1, P2 p2);
    (P1 p1, P2 p2, P3 p3);
    (P1 p1, P2 p2, P3 p3, P4 p4);
    (P1 p1, P2 p2, P3 p3, P4 p4, P5 p5);
    (P1 p1, P2 p2, P3 p3, P4 p4, P5 p5, P6 p6);
}

/// One run of a fold ([`super::fold::fold`]), over operands `1..N` (operand 0's elements go
/// to the step, which may ignore them).
pub(crate) trait RunFold<const N: usize>: Sync {
    type Acc;
    /// The `n` elements of a run (operand `k`'s from `ptrs[k]`, `s[k]` apart) folded in
    /// [`LANES`] lanes from the fold's start, the lanes combined pairwise.
    ///
    /// # Safety
    /// The run's elements are valid elements of each operand (a written one's handed out once);
    /// operand 0's are valid and this thread's alone if the step uses them.
    unsafe fn run(&self, ptrs: [*mut u8; N], s: [isize; N], n: usize) -> Self::Acc;

    /// `width` runs of `n` elements side by side, each folded as [`run`](RunFold::run) folds
    /// it (run `j`'s elements of operand `k` from `ptrs[k] + j * a[k]`): element `g` of every
    /// run into its lane `g % LANES` (lane `l` of run `j` at `lanes[l * width + j]`, so that
    /// the runs' folds vectorise across them); gives each run's lanes combined pairwise.
    ///
    /// # Safety
    /// As [`run`](RunFold::run), for each of the runs; `width <= CHUNK`, each stride in `a` 0
    /// or 1, and an operand read with stride 0 plain.
    unsafe fn run_across(
        &self,
        ptrs: [*mut u8; N],
        strides: ([isize; N], [isize; N]),
        runs: (usize, usize),
        lanes: &mut Vec<Self::Acc>,
    ) -> Vec<Self::Acc>;
}

/// A fold's start, step and combining function over the parts `P`, and which operands are
/// plain (may be copied into chunks).
pub(crate) struct RunFolder<'r, Acc, F, C, P, const N: usize> {
    init: &'r Acc,
    fold: &'r F,
    combine: &'r C,
    plain: [bool; N],
    _parts: PhantomData<fn() -> P>,
}

impl<'r, Acc, F, C, P, const N: usize> RunFolder<'r, Acc, F, C, P, N> {
    /// A fold over parts `P`.
    pub(crate) fn new((init, fold, combine): (&'r Acc, &'r F, &'r C), plain: [bool; N]) -> Self {
        let _parts = PhantomData;
        RunFolder {
            init,
            fold,
            combine,
            plain,
            _parts,
        }
    }
}

/// Element `g` of a run into lane `g % LANES`: the whole groups of [`LANES`] read through
/// chunks (as the engine's kernel reads them) when every operand is unit-stride or plain, into
/// lanes stored across ([`Lanes`]); the rest (a last partial group, a run of other strides)
/// one at a time into the lanes [`moved`](Lanes::moved) to a place of their own. The chunks'
/// lanes see constant lane numbers only: one access at a computed lane keeps them in memory
/// and the fold scalar (the trial log's "Fused loops, second round").
impl<Acc, F, C, P, const N: usize> RunFold<N> for RunFolder<'_, Acc, F, C, P, N>
where
    Acc: Clone + Sync,
    P: engine::Parts<N>,
    F: FoldStep<Acc, P::Items>,
    C: Fn(Acc, Acc) -> Acc + Sync,
{
    type Acc = Acc;
    #[inline(always)]
    unsafe fn run(&self, p: [*mut u8; N], s: [isize; N], n: usize) -> Acc {
        const { assert!(CHUNK.is_multiple_of(LANES)) };
        let fold = self.fold;
        let mut lanes = Lanes::new(self.init);
        let size = F::SIZE;
        let chunked = (size == 0 || s[0] == 1) && (1..N).all(|k| s[k] == 1 || self.plain[k]);
        let (mut bufs, ones) = (P::bufs(), [1; N]);
        let (mut at, whole) = (0, if chunked { n - n % LANES } else { 0 });
        // Operand 0's element `g`: only the address (a stand-in's is never read), contiguous in
        // the chunks, so that stores through it vectorise.
        let (o0, step) = (p[0], s[0] * size as isize);
        let o = move |g: usize| o0.wrapping_offset(g as isize * step);
        let o_chunk = move |g: usize| o0.wrapping_add(g * size);
        // SAFETY: the run's `n` elements of each operand are valid, as the caller promised; a
        // chunk is `m` of them, copied only for a plain operand.
        unsafe {
            while at < whole {
                let m = CHUNK.min(whole - at);
                let q = P::chunks(&P::advance(&p, &s, at as isize), &s, m, at == 0, &mut bufs);
                for i in (0..m).step_by(LANES) {
                    for j in 0..LANES {
                        let (o, x) = (o_chunk(at + i + j), P::at(&q, &ones, i + j));
                        lanes.update(j, |l| fold.step(l, o, x));
                    }
                }
                at += m;
            }
            let mut rest = lanes.moved();
            for g in at..n {
                rest.update(g % LANES, |l| fold.step(l, o(g), P::at(&p, &s, g)));
            }
            pairwise(&mut rest.into_array(), self.combine)
        }
    }

    #[inline(always)]
    unsafe fn run_across(
        &self,
        p: [*mut u8; N],
        (s, a): ([isize; N], [isize; N]),
        (n, width): (usize, usize),
        lanes: &mut Vec<Acc>,
    ) -> Vec<Acc> {
        let (fold, size) = (self.fold, F::SIZE as isize);
        let (mut bufs, ones) = (P::bufs(), [1; N]);
        lanes.clear();
        lanes.resize(LANES * width, self.init.clone());
        for g in 0..n {
            // SAFETY: element `g` of each run, as the caller promised; the `width` elements
            // across (strides 0 or 1) as a unit-stride chunk, a broadcast one copied.
            let row =
                unsafe { P::chunks(&P::advance(&p, &s, g as isize), &a, width, true, &mut bufs) };
            let l = (g % LANES) * width;
            for (j, acc) in lanes[l..l + width].iter_mut().enumerate() {
                let o = p[0].wrapping_offset((g as isize * s[0] + j as isize * a[0]) * size);
                // SAFETY: as above.
                *acc = unsafe { fold.step(acc.clone(), o, P::at(&row, &ones, j)) };
            }
        }
        (0..width)
            .map(|j| {
                let mut each: [Acc; LANES] = std::array::from_fn(|l| lanes[l * width + j].clone());
                pairwise(&mut each, self.combine)
            })
            .collect()
    }
}

/// One run of a map into operand 0 (a group's `for_each`, or the map after a fold).
pub(crate) trait RunMap<const N: usize>: Sync {
    /// The step of the elements at `i` for the `n` elements of a run (operand `k`'s from
    /// `ptrs[k]`, `s[k]` apart; the output is operand 0).
    ///
    /// # Safety
    /// The run's elements are valid, the output's initialised and this thread's alone, distinct
    /// from the operands'.
    unsafe fn map(&self, ptrs: [*mut u8; N], s: [isize; N], n: usize);
}

/// The types a [`RunMapper`] maps between, unowned.
type Marker<R, P> = PhantomData<fn() -> (R, P)>;

/// A map's step and which operands are plain.
pub(crate) struct RunMapper<'r, R, Map, P, const N: usize> {
    map: &'r Map,
    plain: [bool; N],
    _parts: Marker<R, P>,
}

impl<'r, R, Map, P, const N: usize> RunMapper<'r, R, Map, P, N> {
    /// A map over parts `P`.
    pub(crate) fn new(map: &'r Map, plain: [bool; N]) -> Self {
        let _parts = PhantomData;
        RunMapper { map, plain, _parts }
    }
}

impl<R, Map, P, const N: usize> RunMap<N> for RunMapper<'_, R, Map, P, N>
where
    P: engine::Parts<N>,
    Map: MapStep<R, P::Items>,
{
    #[inline(always)]
    unsafe fn map(&self, p: [*mut u8; N], s: [isize; N], n: usize) {
        let (map, o) = (self.map, p[0].cast::<R>());
        let chunked = s[0] == 1 && (1..N).all(|k| s[k] == 1 || self.plain[k]);
        let (mut bufs, ones) = (P::bufs(), [1; N]);
        let mut at = 0;
        // SAFETY: the run's `n` elements of each operand and of the output are valid, as the
        // caller promised; a chunk is `m` of them, copied only for a plain operand.
        unsafe {
            while at < n {
                let m = CHUNK.min(n - at);
                if chunked {
                    let q = P::chunks(&P::advance(&p, &s, at as isize), &s, m, at == 0, &mut bufs);
                    let o = std::slice::from_raw_parts_mut(o.add(at), m);
                    for (i, o) in o.iter_mut().enumerate() {
                        map.step(o, P::at(&q, &ones, i));
                    }
                } else {
                    for g in at..at + m {
                        map.step(&mut *o.offset(g as isize * s[0]), P::at(&p, &s, g));
                    }
                }
                at += m;
            }
        }
    }
}

/// A [`RunFolder`] over the type of `parts`.
pub(crate) fn folder<'r, Acc, F, C, P, const N: usize>(
    _: &P,
    fns: (&'r Acc, &'r F, &'r C),
    plain: [bool; N],
) -> RunFolder<'r, Acc, F, C, P, N> {
    RunFolder::new(fns, plain)
}
