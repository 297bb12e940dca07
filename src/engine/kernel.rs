//! Inner loops. The one elementwise kernel ([`ZipN`], over a tuple of [`Parts`]) picks per run
//! by the operands' inner strides: all unit strides, one loop the compiler vectorises; strided
//! or broadcast operands of plain numbers, copied a chunk at a time onto the stack so that the
//! same loop runs; anything else, the strided loop. The folds follow. The traits and types
//! that `StrictZip`'s sealed operand trait names (`Part`, `Parts`, `Src`, ...) are `pub` in this
//! private module: reachable by no user.

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::slice;

use super::operand::{Operand, Src};

/// One elementwise operation over `N` operands as the engine walks it: its inputs (operands
/// `1..N`, seen at the output shape; operand 0 is the output) and its element loops over a
/// [`Block`]. The engine walks blocks and hands each to [`BlockKernel::block_wide`]; the kernel dereferences the
/// pointers, so that method is `unsafe`. The engine takes kernels as trait objects: it is
/// compiled once, and each op instantiates only its kernel's loops.
pub(crate) trait BlockKernel<const N: usize>: Sync {
    /// Input `k` (`1 <= k < N`), seen at the output shape.
    fn input(&self, k: usize) -> &Operand<'_>;

    /// Runs `blk` from `ptrs`, adding to `written` each output element it writes, in the block's
    /// order (row by row), when the output's elements need dropping (so that a panic in the
    /// element function can drop exactly those of a fresh output).
    ///
    /// # Safety
    /// `blk.n > 0`; every element the block addresses from `ptrs[k]` is a valid element of
    /// operand `k`, of the kernel's element type for that operand; the written ones are
    /// distinct from each other and from every element read, and no other thread touches them.
    unsafe fn block(&self, ptrs: [*mut u8; N], blk: Block<N>, written: &Cell<usize>);

    /// [`block`](BlockKernel::block) in [`widest`]'s copy: its loops vectorise 256 bits wide
    /// on a CPU with AVX2. Results do not depend on the copy: the same scalar operations run
    /// either way, only more of them at once.
    ///
    /// # Safety
    /// As [`block`](BlockKernel::block).
    unsafe fn block_wide(&self, ptrs: [*mut u8; N], blk: Block<N>, written: &Cell<usize>) {
        widest(BlockCall(self, ptrs, blk, written))
    }
}

/// A kernel's call, for [`widest`]: made only by [`BlockKernel::block_wide`], from its caller's
/// promise.
struct BlockCall<'a, K: ?Sized, const N: usize>(&'a K, [*mut u8; N], Block<N>, &'a Cell<usize>);

impl<K: BlockKernel<N> + ?Sized, const N: usize> Widest for BlockCall<'_, K, N> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        // SAFETY: as `block_wide`'s caller promised.
        unsafe { self.0.block(self.1, self.2, self.3) }
    }
}

/// A kernel whose output slots are `S`: a fresh slot (`MaybeUninit<C>`) or an element to
/// overwrite. The engine's entry points take kernels that write the array they are given.
pub(crate) trait Writes<S> {}

/// The vector instruction sets the engine compiles copies of its loops for. Every dispatch
/// takes the widest this CPU runs from [`simd`], the one place that decides: the kernels'
/// AVX2 copy ([`BlockKernel::block_wide`]), the kernel table's copies ([`widest`]), the AVX register
/// transposes. Every copy gives the same bits.
/// (x86-64 only: elsewhere every loop is the baseline's.)
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Simd {
    Baseline,
    Avx2, // with FMA and AVX, which every AVX2 CPU has
}

/// This CPU's widest [`Simd`]; the baseline in the unit tests that clear `tests::WIDE_SIMD`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn simd() -> Simd {
    #[cfg(test)]
    if !tests::WIDE_SIMD.load(std::sync::atomic::Ordering::Relaxed) {
        return Simd::Baseline;
    }
    let avx2 = std::arch::is_x86_feature_detected!("avx2");
    if avx2 && std::arch::is_x86_feature_detected!("fma") {
        return Simd::Avx2;
    }
    Simd::Baseline
}

/// Work compiled into each instruction set's copy: [`widest`] runs it in the AVX2 and FMA copy
/// on a CPU that has them, else in the baseline's. `run` must be `#[inline(always)]`, so that
/// its loops (and the closures they call, as the compiler inlines them) are compiled for the
/// copy; a `mul_add` is then one instruction, not a call.
pub(crate) trait Widest {
    type Out;
    fn run(self) -> Self::Out;
}

/// `w.run()` in the widest copy this CPU runs ([`simd`]).
#[inline(always)]
pub(crate) fn widest<W: Widest>(w: W) -> W::Out {
    #[cfg(target_arch = "x86_64")]
    if simd() >= Simd::Avx2 {
        // SAFETY: `simd` checked that this CPU has AVX2 and FMA.
        return unsafe { widest_avx2(w) };
    }
    w.run()
}

/// [`Widest::run`] compiled with AVX2 and FMA.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn widest_avx2<W: Widest>(w: W) -> W::Out {
    w.run()
}

/// `f`, counting its results in `written` when they need dropping: the kernels write each result
/// as soon as `f` returns, so the count is the number of elements written. For other types the
/// count is compiled out.
#[inline(always)]
fn counted<R>(written: &Cell<usize>, v: R) -> R {
    if std::mem::needs_drop::<R>() {
        written.set(written.get() + 1);
    }
    v
}

/// An operand of [`ZipN`]: its type-erased operand, and how the element function receives its
/// elements: by value (a clone of a read element, [`Src`]) or as `&mut` (an element it
/// updates in place, [`SrcMut`]).
pub trait Part: Sync {
    /// The array's element type.
    type Elem;
    /// What the element function gets.
    type Item;
    fn operand(&self) -> &Operand<'_>;
    /// # Safety
    /// `p` is a valid element of the part's array; a written part's is handed out once, to one
    /// thread.
    unsafe fn item(p: *mut Self::Elem) -> Self::Item;
}

impl<T: Clone + Sync> Part for Src<'_, T> {
    type Elem = T;
    type Item = T;
    fn operand(&self) -> &Operand<'_> {
        Src::operand(self)
    }
    #[inline(always)]
    unsafe fn item(p: *mut T) -> T {
        // SAFETY: a valid element, as the caller promised.
        unsafe { (*p).clone() }
    }
}

/// An array written in place, element by element, as `&'a mut`: at its own shape, never
/// broadcast, never staged or copied (its operand is not `plain`).
pub struct SrcMut<'a, T> {
    operand: Operand<'a>,
    _borrow: PhantomData<&'a mut T>,
}

impl<'a, T> SrcMut<'a, T> {
    pub fn of<D: ndarray::Dimension>(a: &'a mut ndarray::ArrayRef<T, D>) -> Self {
        SrcMut {
            operand: Operand::output(a),
            _borrow: PhantomData,
        }
    }
}

impl<'a, T: Send + Sync> Part for SrcMut<'a, T> {
    type Elem = T;
    type Item = &'a mut T;
    fn operand(&self) -> &Operand<'_> {
        &self.operand
    }
    #[inline(always)]
    unsafe fn item(p: *mut T) -> &'a mut T {
        // SAFETY: an element of the array borrowed mutably for `'a`, handed out once.
        unsafe { &mut *p }
    }
}

/// `out[i] = f(parts.0[i], parts.1[i], ...)`: output slots `S` (fresh, or elements to
/// overwrite), a tuple of [`Part`]s.
pub(crate) struct ZipN<'k, S, P, F> {
    f: &'k F,
    parts: P,
    _out: PhantomData<fn() -> S>,
}

impl<'k, S, P, F> ZipN<'k, S, P, F> {
    pub fn new(f: &'k F, parts: P) -> Self {
        ZipN {
            f,
            parts,
            _out: PhantomData,
        }
    }
}

impl<S, P, F> Writes<S> for ZipN<'_, S, P, F> {}

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

/// A cache line: the unit of the engine's buffers (staging, gathering, compiled chains),
/// aligned for any element. Each staged part starts on a line, and so does every staged row at
/// the padded pitch (whole lines), so wide accesses to them do not straddle two lines.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Line(pub(super) [u8; 64]);

/// A block of work for a kernel: `rows` runs of `n` elements each. Within a run operand `k`
/// moves by `inner[k]`; run `r` starts `r * step[k]` after the first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block<const N: usize> {
    pub n: usize,
    pub inner: [isize; N],
    pub rows: usize,
    pub step: [isize; N],
}

/// An output run of 2 KiB or more is split at its first 32-byte boundary: 256-bit stores that
/// straddle two lines (malloc aligns to 16) cost half again in cache (512² adds 1.2x without).
const STORE_ALIGN: usize = 32;

/// The inputs of [`ZipN`]: a tuple of 1 to 6 [`Part`]s, operands `1..N` of a walk of `N`
/// operands (operand 0 is the output; the methods ignore `p[0]`). What differs with the number
/// of inputs is here, generated once per tuple size ([`parts!`]); the loops over the elements
/// ([`zip_run`], `StrictZip`'s folds) are written once, over this trait.
pub trait Parts<const N: usize>: Sync {
    /// The elements a function gets, as a tuple.
    type Items;
    /// One chunk buffer per part ([`chunk`]).
    type Bufs;
    /// Operand `k` (`1 <= k < N`).
    fn operand(&self, k: usize) -> &Operand<'_>;
    fn bufs() -> Self::Bufs;
    /// The items at element `i` of each part's run from `p[k]`, `s[k]` apart.
    ///
    /// # Safety
    /// Element `i` of each run is valid ([`Part::item`]).
    unsafe fn at(p: &[*mut u8; N], s: &[isize; N], i: usize) -> Self::Items;
    /// Each part's pointer moved by `by` times `s[k]` of its elements (`p[0]` as it is).
    ///
    /// # Safety
    /// Each moved pointer is an element of its operand's array.
    unsafe fn advance(p: &[*mut u8; N], s: &[isize; N], by: isize) -> [*mut u8; N];
    /// Each part's `m` elements from `p[k]`, `s[k]` apart, as a unit-stride run ([`chunk`]).
    ///
    /// # Safety
    /// As [`chunk`], for each part.
    unsafe fn chunks(
        p: &[*mut u8; N],
        s: &[isize; N],
        m: usize,
        first: bool,
        bufs: &mut Self::Bufs,
    ) -> [*mut u8; N];
}

/// `f(items...)`: a function of each of a tuple's items ([`Parts::Items`]).
pub trait Apply<Items> {
    type Out;
    fn apply(&self, items: Items) -> Self::Out;
}

/// `f(x, items...)`: a function of a first value (an accumulator, a fold's result) and each of
/// a tuple's items.
pub trait ApplyWith<X, Items> {
    type Out;
    fn apply_with(&self, x: X, items: Items) -> Self::Out;
}

/// [`Parts`], [`Apply`] and [`ApplyWith`] for each tuple size.
macro_rules! parts {
    ($($n:literal: ($($P:ident $p:ident $k:tt $i:tt),+);)*) => {$(
        impl<$($P: Part),+> Parts<$n> for ($($P,)+) {
            type Items = ($($P::Item,)+);
            type Bufs = ($([MaybeUninit<$P::Elem>; CHUNK],)+);
            fn operand(&self, k: usize) -> &Operand<'_> {
                [$(self.$i.operand()),+][k - 1]
            }
            #[inline(always)]
            fn bufs() -> Self::Bufs {
                ($([const { MaybeUninit::<$P::Elem>::uninit() }; CHUNK],)+)
            }
            #[inline(always)]
            unsafe fn at(p: &[*mut u8; $n], s: &[isize; $n], i: usize) -> Self::Items {
                // SAFETY: as the caller promised.
                unsafe { ($($P::item(p[$k].cast::<$P::Elem>().offset(i as isize * s[$k])),)+) }
            }
            #[inline(always)]
            unsafe fn advance(p: &[*mut u8; $n], s: &[isize; $n], by: isize) -> [*mut u8; $n] {
                let mut out = *p;
                // SAFETY: as the caller promised.
                $(out[$k] = unsafe { p[$k].cast::<$P::Elem>().offset(by * s[$k]) }.cast();)+
                out
            }
            #[inline(always)]
            unsafe fn chunks(
                p: &[*mut u8; $n],
                s: &[isize; $n],
                m: usize,
                first: bool,
                bufs: &mut Self::Bufs,
            ) -> [*mut u8; $n] {
                let mut out = *p;
                // SAFETY: as the caller promised.
                $(out[$k] = unsafe { chunk(p[$k].cast::<$P::Elem>(), s[$k], m, first, &mut bufs.$i) }.cast();)+
                out
            }
        }
        impl<F: Fn($($P),+) -> R, R, $($P),+> Apply<($($P,)+)> for F {
            type Out = R;
            #[inline(always)]
            fn apply(&self, ($($p,)+): ($($P,)+)) -> R {
                self($($p),+)
            }
        }
        impl<F: Fn(X, $($P),+) -> R, X, R, $($P),+> ApplyWith<X, ($($P,)+)> for F {
            type Out = R;
            #[inline(always)]
            fn apply_with(&self, x: X, ($($p,)+): ($($P,)+)) -> R {
                self(x, $($p),+)
            }
        }
    )*};
}
parts! {
    2: (A a 1 0);
    3: (A a 1 0, B b 2 1);
    4: (A a 1 0, B b 2 1, C c 3 2);
    5: (A a 1 0, B b 2 1, C c 3 2, D d 4 3);
    6: (A a 1 0, B b 2 1, C c 3 2, D d 4 3, E e 5 4);
    7: (A a 1 0, B b 2 1, C c 3 2, D d 4 3, E e 5 4, G g 6 5);
}

/// `o[i] = f(parts at i)` over a block: the engine's one elementwise kernel (every eager op,
/// `StrictZip`'s maps, the in-place ops). A long unit-stride output run goes as two pieces,
/// split at its first [`STORE_ALIGN`] boundary.
impl<S, C, P, F, const N: usize> BlockKernel<N> for ZipN<'_, S, P, F>
where
    S: Sink<C>,
    P: Parts<N>,
    F: Apply<P::Items, Out = C> + Sync,
{
    fn input(&self, k: usize) -> &Operand<'_> {
        self.parts.operand(k)
    }

    #[inline(always)]
    unsafe fn block(&self, p: [*mut u8; N], blk: Block<N>, written: &Cell<usize>) {
        let f = |items| counted(written, self.f.apply(items));
        let plain: [bool; N] = std::array::from_fn(|k| k == 0 || self.parts.operand(k).plain);
        let split = blk.inner[0] == 1 && blk.n * size_of::<S>() >= 2048;
        for r in 0..blk.rows as isize {
            // SAFETY: run `r` of the block, as the caller promised of each.
            let mut row = unsafe { P::advance(&p, &blk.step, r) };
            // SAFETY: as for the parts.
            row[0] = unsafe { p[0].cast::<S>().offset(r * blk.step[0]) }.cast();
            // `head < n` (an alignment that cannot be reached, `usize::MAX`, means no split).
            let head = match split.then(|| row[0].cast::<S>().align_offset(STORE_ALIGN)) {
                Some(h) if h < blk.n => h,
                _ => 0,
            };
            for (from, to) in [(0, head), (head, blk.n)] {
                // SAFETY: elements `from..to` of run `r`, as the caller promised.
                unsafe { zip_run::<S, C, P, N>(&row, &blk.inner, plain, from, to, &f) }
            }
        }
    }
}

/// Elements `from..to` of one run (operand `k`'s from `p[k]`, `s[k]` apart, in its elements):
/// one loop when every stride is 1 (which the compiler vectorises); in chunks of [`CHUNK`]
/// when the output's is 1 and every other operand is unit-stride or `plain` (the strided or
/// broadcast ones copied into a stack buffer first, so that the same loop runs); else the
/// strided loop.
///
/// # Safety
/// The run's elements are valid elements of their operands, the output's this thread's alone
/// and distinct from every element read.
#[inline(always)]
unsafe fn zip_run<S: Sink<C>, C, P: Parts<N>, const N: usize>(
    p: &[*mut u8; N],
    s: &[isize; N],
    plain: [bool; N],
    from: usize,
    to: usize,
    f: &impl Fn(P::Items) -> C,
) {
    let o = p[0].cast::<S>();
    let ones = [1; N];
    // SAFETY: as the caller promised; a chunk is `m` of the run's elements.
    unsafe {
        if *s == ones {
            for i in from..to {
                (*o.add(i)).put(f(P::at(p, &ones, i)));
            }
        } else if s[0] == 1 && (0..N).all(|k| s[k] == 1 || plain[k]) {
            let mut bufs = P::bufs();
            let mut at = from;
            while at < to {
                let m = CHUNK.min(to - at);
                let q = P::chunks(&P::advance(p, s, at as isize), s, m, at == from, &mut bufs);
                let o = o.add(at);
                for i in 0..m {
                    (*o.add(i)).put(f(P::at(&q, &ones, i)));
                }
                at += m;
            }
        } else {
            for i in from..to {
                (*o.offset(i as isize * s[0])).put(f(P::at(p, s, i)));
            }
        }
    }
}

/// Elements a strided or broadcast operand is copied in, at a time ([`chunk`]).
pub(crate) const CHUNK: usize = 64;

/// `m` elements of an operand from `p` at stride `s`, as one contiguous run: `p` itself for a
/// unit stride, else the elements copied into `buf` (a broadcast one, the same element, only
/// when `first`: the run's later chunks find it there).
///
/// # Safety
/// The `m` elements are valid; a stride other than 1 is an operand of plain elements (their
/// bits are their values, no drop), only read.
#[inline(always)]
unsafe fn chunk<T>(
    p: *mut T,
    s: isize,
    m: usize,
    first: bool,
    buf: &mut [MaybeUninit<T>; CHUNK],
) -> *mut T {
    if s == 1 {
        return p;
    }
    if s != 0 || first {
        for (j, b) in buf[..m].iter_mut().enumerate() {
            // SAFETY: element `j < m` of the run, as the caller promised; a plain copy.
            b.write(unsafe { std::ptr::read(p.offset(j as isize * s)) });
        }
    }
    buf.as_mut_ptr().cast()
}

/// `o[i] = f(o[i], b[i])` for one run of `n` elements; `s[0] == 0` folds the run into one
/// element.
///
/// # Safety
/// Every element the run addresses is a valid element of its operand, the written ones this
/// thread's alone and distinct from those read; `o` may repeat (stride 0) only when no other
/// thread writes that element.
#[inline(always)]
unsafe fn update_row<A: Clone, B: Clone>(
    o: *mut A,
    b: *const B,
    n: usize,
    s: [isize; 2],
    f: &impl Fn(A, B) -> A,
) {
    // SAFETY: as the caller promised, for one run of `n` elements: the slice spans a
    // unit-stride run of `b`, and the one output element of a stride-0 run is held as one `&mut`.
    unsafe {
        match s {
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
}

/// `o = f(o, x)` over each run of a block, element by element in index order: a fold whose
/// result does not depend on the order (max, min, and, or), or one whose order nothing fixes
/// (a product), at a fraction of [`fold_block`]'s code.
///
/// # Safety
/// As [`fold_block`].
#[inline(always)]
#[cfg(feature = "stablehlo")]
pub(crate) unsafe fn fold_plain<A: Clone>(
    o: *mut A,
    b: *const A,
    Block {
        n,
        inner: s,
        rows,
        step,
    }: Block<2>,
    f: &impl Fn(A, A) -> A,
) {
    for r in 0..rows as isize {
        // SAFETY: run `r` of the block, as the caller promised of each.
        unsafe { update_row(o.offset(r * step[0]), b.offset(r * step[1]), n, s, f) }
    }
}

/// Lanes of a contiguous fold: independent accumulators let the compiler vectorise a reduction
/// (or at least overlap its steps) that would otherwise wait on one running value.
const LANES: usize = 16;

/// The order in which a fold may combine the elements of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FoldOrder {
    /// Any order, for an element op known to be commutative (XLA's `add`): lane `k` takes
    /// elements `k, k + LANES, ...`, which vectorises.
    Any,
    /// Index order, for a function known only to be associative (a user's closure): lane `k`
    /// takes the `k`-th contiguous chunk, and the lanes are combined first to last.
    Index,
}

/// A fold: its function, its identity (`f(identity, x) == x`) and the order it may combine in;
/// and `lanes`, `f` as a contiguous run's lanes may compute it: the same value but, where both
/// operands are NaN, either's NaN (floats' `+` and `*`, one instruction, where `f`'s select
/// chains through the lane: 3x slower in cache). A lane that ends `nan` is folded again with
/// `f`, so the fold gives `f`'s bits in every case.
pub(crate) struct Fold<'a, A, F, G = F> {
    pub identity: &'a A,
    pub f: &'a F,
    pub order: FoldOrder,
    pub lanes: &'a G,
    pub nan: fn(&A) -> bool,
}

impl<'a, A, F> Fold<'a, A, F> {
    /// A fold whose lanes run `f` itself.
    pub fn new(identity: &'a A, f: &'a F, order: FoldOrder) -> Self {
        Fold {
            identity,
            f,
            order,
            lanes: f,
            nan: |_| false,
        }
    }
}

/// `o[i * s[0]] = f(o[i * s[0]], b[i * s[1]])` for `n` elements, as [`update_row`], but a run
/// folding a contiguous `b` into one element (`s == [0, 1]`) keeps [`LANES`] partial results
/// started at `identity`, taken as `order` allows, and combines them in a fixed order at the
/// end: in any order, pairwise ([`pairwise_lanes`]); in index order, lane `k` the `k`-th chunk.
///
/// # Safety
/// As [`update_row`].
#[inline(always)]
unsafe fn fold_row<A: Clone>(
    o: *mut A,
    b: *const A,
    n: usize,
    s: [isize; 2],
    fold: &Fold<'_, A, impl Fn(A, A) -> A, impl Fn(A, A) -> A>,
) {
    let Fold { identity, f, .. } = *fold;
    // SAFETY: as in `update_row`: a `[0, 1]` run is `n` contiguous elements of `b` folded
    // into the one element `o`, which no other thread touches.
    unsafe {
        if s != [0, 1] || n < 2 * LANES {
            return update_row(o, b, n, s, f);
        }
        let b = slice::from_raw_parts(b, n);
        let m = n / LANES;
        let (lanes, tail) = match fold.order {
            FoldOrder::Any => {
                // Where a lane ends NaN, all again with `f` itself: its bits are then `f`'s.
                let fast = pairwise_lanes(b, identity, fold.lanes);
                match fast.iter().any(|l| (fold.nan)(l)) {
                    true => (pairwise_lanes(b, identity, f), &[][..]),
                    false => (fast, &[][..]),
                }
            }
            FoldOrder::Index => {
                let chunks: [&[A]; LANES] = std::array::from_fn(|k| &b[k * m..(k + 1) * m]);
                let mut lanes: [A; LANES] = std::array::from_fn(|_| identity.clone());
                for i in 0..m {
                    for (l, chunk) in lanes.iter_mut().zip(&chunks) {
                        *l = (fold.lanes)(l.clone(), chunk[i].clone());
                    }
                }
                for (l, chunk) in lanes.iter_mut().zip(&chunks) {
                    if (fold.nan)(l) {
                        *l = chunk
                            .iter()
                            .fold(identity.clone(), |acc, x| f(acc, x.clone()));
                    }
                }
                (lanes, &b[LANES * m..])
            }
        };
        let o = &mut *o;
        let mut acc = o.clone();
        for l in lanes {
            acc = f(acc, l);
        }
        for x in tail {
            acc = f(acc, x.clone());
        }
        *o = acc;
    }
}

/// Elements of a run that [`pairwise_lanes`] folds in lanes, in order, before halving.
const BLOCK: usize = LANES * 64;

/// `b` folded with `op` (commutative) into [`LANES`] lanes, pairwise (as NumPy sums): the two
/// halves (cut at a whole number of [`BLOCK`]s, the first the larger) folded apart and their
/// lanes combined, down to a block, folded in lanes from `identity` (element `i` into lane
/// `i % LANES`). A float sum's error grows with the log of the length, not the length.
fn pairwise_lanes<A: Clone>(b: &[A], identity: &A, op: &impl Fn(A, A) -> A) -> [A; LANES] {
    if b.len() > BLOCK {
        let mid = b.len().div_ceil(2 * BLOCK) * BLOCK;
        let mut lanes = pairwise_lanes(&b[..mid], identity, op);
        for (x, y) in lanes
            .iter_mut()
            .zip(pairwise_lanes(&b[mid..], identity, op))
        {
            *x = op(x.clone(), y);
        }
        return lanes;
    }
    let mut lanes: [A; LANES] = std::array::from_fn(|_| identity.clone());
    let chunks = b.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (l, x) in lanes.iter_mut().zip(chunk) {
            *l = op(l.clone(), x.clone());
        }
    }
    for (l, x) in lanes.iter_mut().zip(tail) {
        *l = op(l.clone(), x.clone());
    }
    lanes
}

/// [`fold_row`] over each run of a block (operand 0 the accumulator, 1 the source), in order
/// (the reduce driver folds longer runs of rows pairwise: `reduce::Walk`); contiguous rows
/// into one contiguous run four a pass, in the same order: a quarter of the run's loads and
/// stores.
///
/// # Safety
/// As [`fold_row`] for each run; the accumulator runs are this thread's alone.
#[inline(always)]
pub(crate) unsafe fn fold_block<A: Clone>(
    o: *mut A,
    b: *const A,
    blk: Block<2>,
    fold: &Fold<'_, A, impl Fn(A, A) -> A, impl Fn(A, A) -> A>,
) {
    let (f, mut r) = (fold.f, 0);
    // SAFETY: every run is `n` elements of its operand, as the caller promised; the one
    // accumulator run (step 0) is this thread's and not part of the source.
    unsafe {
        while blk.step[0] == 0 && blk.inner == [1, 1] && r + 4 <= blk.rows as isize {
            let run = slice::from_raw_parts_mut(o, blk.n);
            let x: [&[A]; 4] = std::array::from_fn(|k| {
                slice::from_raw_parts(b.offset((r + k as isize) * blk.step[1]), blk.n)
            });
            for (i, p) in run.iter_mut().enumerate() {
                let two = f(f(p.clone(), x[0][i].clone()), x[1][i].clone());
                *p = f(f(two, x[2][i].clone()), x[3][i].clone());
            }
            r += 4;
        }
        for r in r..blk.rows as isize {
            let (at, n) = (r * blk.step[0], blk.n);
            fold_row(o.offset(at), b.offset(r * blk.step[1]), n, blk.inner, fold);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::XlaElement;

    /// Cleared by the unit tests to compare the copies of the kernels (x86-64's: elsewhere
    /// there is one).
    #[cfg(target_arch = "x86_64")]
    pub(crate) static WIDE_SIMD: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(true);

    fn fold_bits<G: Fn(f32, f32) -> f32>(
        row: &[f32],
        fold: &Fold<'_, f32, fn(f32, f32) -> f32, G>,
    ) -> u32 {
        let mut o = 0.0f32;
        // SAFETY: `row` is `row.len()` contiguous elements folded into `o`, this test's own.
        unsafe { fold_row(&mut o, row.as_ptr(), row.len(), [0, 1], fold) };
        o.to_bits()
    }

    /// A fold whose lanes add with one instruction, its NaN lanes folded again, gives the bits
    /// of the fold whose lanes run `xla_add` itself: rows with NaNs of both signs and payloads
    /// (or none, or infinities of both signs), short and long, with and without a tail.
    #[test]
    fn nan_lanes_folded_again_give_the_ops_bits() {
        let nans = [0x7fc0_0000u32, 0xffc0_0000, 0x7fa0_0001];
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) as usize
        };
        let (zero, add): (f32, fn(f32, f32) -> f32) = (0.0, f32::xla_add);
        let mut nan_lanes = 0;
        for n in [5, 31, 32, 33, 47, 64, 100, 257] {
            for round in 0..40 {
                let row: Vec<f32> = (0..n)
                    .map(|_| match (next() % 9, round % 3) {
                        (k @ 0..=2, 0) => f32::from_bits(nans[k]),
                        (3, 1) => f32::INFINITY,
                        (4, 1) => f32::NEG_INFINITY,
                        (k, _) => k as f32 - 4.5,
                    })
                    .collect();
                for order in [FoldOrder::Any, FoldOrder::Index] {
                    let exact = Fold::new(&zero, &add, order);
                    let fast = Fold {
                        identity: &zero,
                        f: &add,
                        order,
                        lanes: &f32::xla_add_lanes,
                        nan: |x: &f32| x.is_nan(),
                    };
                    let want = fold_bits(&row, &exact);
                    assert_eq!(fold_bits(&row, &fast), want, "{order:?} over {row:?}");
                    nan_lanes += usize::from(f32::from_bits(want).is_nan());
                }
            }
        }
        assert!(nan_lanes > 100, "the NaN rows were too few: {nan_lanes}");
    }
}
