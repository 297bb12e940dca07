//! The crate against an independent, naive reference evaluator (index by index, no stride
//! tricks, no parallelism) on random shapes, random valid and invalid `broadcast_dimensions`
//! and operands of random strides (transposed, stepped, reversed, broadcast views).

use ndarray::{ArrayBase, ArrayD, ArrayViewD, Axis, Dimension, IxDyn, RawData, Slice};
use proptest::prelude::*;
use xla_bcast::layout::{self, Layout};
use xla_bcast::prelude::*;
use xla_bcast::{numpy, paddle, shape, with_parallelism, Parallelism};

// ----- the reference -----

/// XLA's binary-op shape rule, written independently of the crate.
fn ref_binary_shape(lhs: &[usize], rhs: &[usize], dims: &[usize]) -> Option<Vec<usize>> {
    let (small, big, small_is_lhs) = if lhs.len() <= rhs.len() {
        (lhs, rhs, true)
    } else {
        (rhs, lhs, false)
    };
    let dims: Vec<usize> = if lhs.len() == rhs.len() {
        if !(dims.is_empty() || dims.iter().enumerate().all(|(i, &d)| i == d)) {
            return None;
        }
        (0..lhs.len()).collect()
    } else {
        if dims.len() != small.len() || dims.iter().any(|&d| d >= big.len()) {
            return None;
        }
        if dims.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        dims.to_vec()
    };
    let _ = small_is_lhs;
    let mut out = big.to_vec();
    for (i, &d) in dims.iter().enumerate() {
        let (a, b) = (small[i], big[d]);
        out[d] = if a == b {
            a
        } else if a == 1 {
            b
        } else if b == 1 {
            a
        } else {
            return None;
        };
    }
    Some(out)
}

/// The index of `x` that output index `idx` reads, when `x`'s dim `i` sits at output dim `dims[i]`.
fn source_index(x_shape: &[usize], dims: &[usize], idx: &[usize]) -> Vec<usize> {
    dims.iter()
        .enumerate()
        .map(|(i, &d)| if x_shape[i] == 1 { 0 } else { idx[d] })
        .collect()
}

fn ref_broadcast_in_dim(x: &ArrayViewD<i32>, out: &[usize], dims: &[usize]) -> Option<ArrayD<i32>> {
    if dims.len() != x.ndim() || dims.iter().any(|&d| d >= out.len()) {
        return None;
    }
    if (0..dims.len()).any(|i| dims[..i].contains(&dims[i])) {
        return None;
    }
    if dims
        .iter()
        .enumerate()
        .any(|(i, &d)| x.shape()[i] != 1 && x.shape()[i] != out[d])
    {
        return None;
    }
    Some(ArrayD::from_shape_fn(IxDyn(out), |idx| {
        x[source_index(x.shape(), dims, idx.slice()).as_slice()]
    }))
}

fn ref_binary(
    a: &ArrayViewD<i32>,
    b: &ArrayViewD<i32>,
    dims: &[usize],
    f: impl Fn(i32, i32) -> i32,
) -> Option<ArrayD<i32>> {
    let out = ref_binary_shape(a.shape(), b.shape(), dims)?;
    let (ad, bd): (Vec<usize>, Vec<usize>) = match a.ndim().cmp(&b.ndim()) {
        std::cmp::Ordering::Equal => ((0..a.ndim()).collect(), (0..b.ndim()).collect()),
        std::cmp::Ordering::Less => (dims.to_vec(), (0..b.ndim()).collect()),
        std::cmp::Ordering::Greater => ((0..a.ndim()).collect(), dims.to_vec()),
    };
    Some(ArrayD::from_shape_fn(IxDyn(&out), |idx| {
        let i = idx.slice();
        f(
            a[source_index(a.shape(), &ad, i).as_slice()],
            b[source_index(b.shape(), &bd, i).as_slice()],
        )
    }))
}

fn ref_numpy_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let pad = |s: &[usize]| [vec![1; r - s.len()], s.to_vec()].concat();
    let (a, b) = (pad(a), pad(b));
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| {
            if x == y || y == 1 {
                Some(x)
            } else if x == 1 {
                Some(y)
            } else {
                None
            }
        })
        .collect()
}

fn ref_paddle_shape(x: &[usize], y: &[usize], axis: isize) -> Option<Vec<usize>> {
    if x == y {
        return Some(x.to_vec());
    }
    let r = x.len().max(y.len()) as isize;
    if axis != -1 && !(0 <= axis && axis < r) {
        return None;
    }
    if x.len() == y.len() {
        if axis > 0 {
            return None;
        }
        return ref_numpy_shape(x, y);
    }
    let (big, small) = if x.len() > y.len() { (x, y) } else { (y, x) };
    let mut small = small.to_vec();
    while small.last() == Some(&1) {
        small.pop();
    }
    let start = if axis == -1 {
        big.len() - if x.len() > y.len() { y.len() } else { x.len() }
    } else {
        axis as usize
    };
    if start + small.len() > big.len() {
        return None;
    }
    let mut out = big.to_vec();
    for (i, &s) in small.iter().enumerate() {
        let b = big[start + i];
        out[start + i] = if s == b || s == 1 {
            b
        } else if b == 1 {
            s
        } else {
            return None;
        };
    }
    Some(out)
}

/// An element function and the name of the op that applies it.
type Op = (fn(i32, i32) -> i32, &'static str);

// ----- operands of random strides -----

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Standard,
    Transposed,
    /// Transposed, then every other axis reversed (at rank 2 a rot90: strides (-1, n)).
    Rotated,
    Stepped,
    /// Transposed, then sliced with a step of 2 along every axis (staged through gathers).
    SteppedTransposed,
    Reversed,
    Broadcast,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Standard),
        Just(Kind::Transposed),
        Just(Kind::Rotated),
        Just(Kind::Stepped),
        Just(Kind::SteppedTransposed),
        Just(Kind::Reversed),
        Just(Kind::Broadcast)
    ]
}

/// Storage for an operand of `shape` whose view has the strides `kind` asks for; `seed` varies
/// the values. The view is taken with [`view_of`].
fn storage(shape: &[usize], kind: Kind, seed: i32) -> ArrayD<i32> {
    let fill = |s: &[usize]| {
        let n: usize = s.iter().product();
        ArrayD::from_shape_vec(
            IxDyn(s),
            (0..n as i32)
                .map(|v| v.wrapping_mul(7919).wrapping_add(seed) % 201 - 100)
                .collect(),
        )
        .unwrap()
    };
    match kind {
        Kind::Standard | Kind::Reversed => fill(shape),
        Kind::Transposed | Kind::Rotated => {
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            fill(&rev)
        }
        Kind::Stepped => fill(&shape.iter().map(|&n| 2 * n + 1).collect::<Vec<_>>()),
        Kind::SteppedTransposed => {
            fill(&shape.iter().rev().map(|&n| 2 * n + 1).collect::<Vec<_>>())
        }
        Kind::Broadcast => fill(
            &shape
                .iter()
                .enumerate()
                .map(|(i, &n)| if i % 2 == 0 { n.min(1) } else { n })
                .collect::<Vec<_>>(),
        ),
    }
}

fn view_of<'a>(st: &'a ArrayD<i32>, shape: &[usize], kind: Kind) -> ArrayViewD<'a, i32> {
    match kind {
        Kind::Broadcast => st.broadcast(IxDyn(shape)).unwrap(),
        _ => laid_out(st.view(), shape, kind),
    }
}

/// The view of [`storage`] at `shape` that `kind` (not [`Kind::Broadcast`]) asks for, shared
/// or mutable.
fn laid_out<S: RawData<Elem = i32>>(
    v: ArrayBase<S, IxDyn>,
    shape: &[usize],
    kind: Kind,
) -> ArrayBase<S, IxDyn> {
    match kind {
        Kind::Standard | Kind::Broadcast => v,
        Kind::Transposed => v.reversed_axes(),
        Kind::Rotated => {
            let mut v = v.reversed_axes();
            for ax in (0..v.ndim()).step_by(2) {
                v.invert_axis(Axis(ax));
            }
            v
        }
        Kind::Stepped | Kind::SteppedTransposed => {
            let mut v = match kind {
                Kind::Stepped => v,
                _ => v.reversed_axes(),
            };
            for (ax, &n) in shape.iter().enumerate() {
                v.slice_axis_inplace(Axis(ax), Slice::new(1, None, 2));
                v.slice_axis_inplace(Axis(ax), Slice::from(..n));
            }
            v
        }
        Kind::Reversed => {
            let mut v = v;
            for ax in (0..v.ndim()).step_by(2) {
                v.invert_axis(Axis(ax));
            }
            v
        }
    }
}

fn small_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![3 => 1usize..=4, 1 => Just(0usize), 1 => 5usize..=6],
        0..=6,
    )
}

/// An output shape, a lower-rank operand's shape with a valid dims list, or (sometimes) a
/// corrupted one.
fn binary_case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>, bool)> {
    small_shape().prop_flat_map(|big| {
        let n = big.len();
        (
            Just(big),
            prop::sample::subsequence((0..n).collect::<Vec<usize>>(), 0..=n),
            prop::collection::vec(any::<bool>(), n),
            any::<bool>(),
            0usize..4,
        )
            .prop_map(|(big, dims, ones, swap, corrupt)| {
                let mut small: Vec<usize> = dims
                    .iter()
                    .zip(&ones)
                    .map(|(&d, &one)| if one { 1 } else { big[d] })
                    .collect();
                let mut dims = dims;
                match corrupt {
                    1 if !dims.is_empty() => dims.reverse(),
                    2 if !small.is_empty() => small[0] += 1,
                    3 if !dims.is_empty() => dims[0] += 1,
                    _ => {}
                }
                (big, small, dims, swap)
            })
    })
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn binary_ops_match_reference((big, small, dims, swap) in binary_case(), ka in kind(), kb in kind(), seed in 0i32..100) {
        let (ls, rs) = if swap { (small.clone(), big.clone()) } else { (big.clone(), small.clone()) };
        let (sa, sb) = (storage(&ls, ka, seed), storage(&rs, kb, seed + 1));
        let (a, b) = (view_of(&sa, &ls, ka), view_of(&sb, &rs, kb));
        prop_assert_eq!(shape::binary_op_shape(&ls, &rs, &dims).ok(), ref_binary_shape(&ls, &rs, &dims));
        // The references for the bitwise ops and shifts are written out here, not the crate's.
        let ops: [Op; 14] = [
            (i32::xla_add, "add"), (i32::xla_sub, "sub"), (i32::xla_mul, "mul"), (i32::xla_div, "div"),
            (i32::xla_rem, "rem"), (i32::xla_max, "max"), (i32::xla_min, "min"), (i32::xla_pow, "pow"),
            (|x, y| x & y, "and"), (|x, y| x | y, "or"), (|x, y| x ^ y, "xor"),
            (|x, y| if (0..32).contains(&y) { x << y } else { 0 }, "shift_left"),
            (|x, y| x >> if (0..32).contains(&y) { y } else { 31 }, "shift_right_arithmetic"),
            (|x, y| if (0..32).contains(&y) { ((x as u32) >> y) as i32 } else { 0 }, "shift_right_logical"),
        ];
        for (f, name) in ops {
            let got = match name {
                "add" => a.add_bcast(&b, &dims), "sub" => a.sub_bcast(&b, &dims), "mul" => a.mul_bcast(&b, &dims),
                "div" => a.div_bcast(&b, &dims), "rem" => a.rem_bcast(&b, &dims), "max" => a.max_bcast(&b, &dims),
                "min" => a.min_bcast(&b, &dims), "pow" => a.pow_bcast(&b, &dims),
                "and" => a.and_bcast(&b, &dims), "or" => a.or_bcast(&b, &dims), "xor" => a.xor_bcast(&b, &dims),
                "shift_left" => a.shift_left_bcast(&b, &dims),
                "shift_right_arithmetic" => a.shift_right_arithmetic_bcast(&b, &dims),
                _ => a.shift_right_logical_bcast(&b, &dims),
            };
            prop_assert_eq!(got.ok(), ref_binary(&a, &b, &dims, f), "{}", name);
        }
        // atan2 on the same operands as f64, against std's atan2.
        let (fa, fb) = (a.mapv(f64::from), b.mapv(f64::from));
        let want = ref_binary(&a, &b, &dims, |x, y| x ^ y).map(|w| w.shape().to_vec());
        let got = fa.atan2_bcast(&fb, &dims).ok();
        prop_assert_eq!(got.as_ref().map(|g| g.shape().to_vec()), want);
        if let Some(g) = got {
            let ok = ref_binary(&a, &b, &dims, |x, y| f64::from(x).atan2(f64::from(y)).to_bits() as i32);
            let bits = g.mapv(|v| v.to_bits() as i32);
            prop_assert_eq!(Some(bits), ok);
        }
        if let Ok(r) = a.add_bcast(&b, &dims) {
            // One contiguous block, no negative stride; standard layout unless an input is
            // transposed (C-ordered, stepped, reversed and broadcast inputs have nothing else to follow).
            prop_assert!(r.as_slice_memory_order().is_some() && r.strides().iter().all(|&s| s >= 0));
            let transposed = |k| matches!(k, Kind::Transposed | Kind::Rotated | Kind::SteppedTransposed);
            let transposed = transposed(ka) || transposed(kb);
            prop_assert!(transposed || r.is_standard_layout());
        }
        let lt = a.lt_bcast(&b, &dims).ok();
        let want = ref_binary(&a, &b, &dims, |x, y| (x < y) as i32).map(|r| r.mapv(|v| v == 1));
        prop_assert_eq!(lt, want);
        // _into and in place agree, and write nothing on error.
        if let Some(want) = ref_binary(&a, &b, &dims, i32::xla_sub) {
            let mut out = ArrayD::<i32>::from_elem(IxDyn(want.shape()), 99);
            a.sub_bcast_into(&b, &dims, &mut out).unwrap();
            prop_assert_eq!(&out, &want);
            if want.shape() == a.shape() {
                let mut acc = a.to_owned();
                acc.sub_assign_bcast(&b, &dims).unwrap();
                prop_assert_eq!(&acc, &want);
            }
        } else {
            let mut out = ArrayD::<i32>::from_elem(IxDyn(a.shape()), 99);
            prop_assert!(a.sub_bcast_into(&b, &dims, &mut out).is_err());
            prop_assert!(out.iter().all(|&x| x == 99));
            let mut acc = a.to_owned();
            let before = acc.clone();
            prop_assert!(acc.sub_assign_bcast(&b, &dims).is_err());
            prop_assert_eq!(acc, before);
        }
    }

    #[test]
    fn broadcast_in_dim_matches_reference(
        (out, operand, dims) in small_shape().prop_flat_map(|out| {
            let n = out.len();
            (Just(out), Just((0..n).collect::<Vec<usize>>()).prop_shuffle(), 0..=n, prop::collection::vec(0usize..3, n), 0usize..4)
                .prop_map(|(out, perm, k, ones, corrupt)| {
                    let mut dims = perm[..k].to_vec();
                    let mut operand: Vec<usize> = dims.iter().zip(&ones).map(|(&d, &o)| if o == 0 { 1 } else { out[d] }).collect();
                    match corrupt {
                        1 if dims.len() > 1 => dims[1] = dims[0],
                        2 if !operand.is_empty() => operand[0] += 1,
                        3 => dims.push(out.len()),
                        _ => {}
                    }
                    if dims.len() > operand.len() { operand.push(1); }
                    (out, operand, dims)
                })
        }),
        k in kind(),
    ) {
        let st = storage(&operand, k, 3);
        let x = view_of(&st, &operand, k);
        let got = x.broadcast_in_dim(&out, &dims).map(|v| v.to_owned()).ok();
        prop_assert_eq!(got.clone(), ref_broadcast_in_dim(&x, &out, &dims));
        // The adjoint agrees with the naive sum over the same mapping.
        if got.is_some() {
            let n: usize = out.iter().product();
            let y = ArrayD::from_shape_vec(IxDyn(&out), (0..n as i32).collect()).unwrap();
            let r = y.reduce_in_dim(&operand, &dims).unwrap();
            let mut want = ArrayD::<i32>::zeros(IxDyn(&operand));
            for (idx, &v) in y.indexed_iter() {
                want[source_index(&operand, &dims, idx.slice()).as_slice()] += v;
            }
            prop_assert_eq!(r, want);
        }
    }

    /// Equal shapes with no `broadcast_dimensions`, or the identity: the rule's simplest case,
    /// which enters the engine on a road of its own, in every layout.
    #[test]
    fn equal_shapes_match_reference(shape in small_shape(), ka in kind(), kb in kind(), kc in kind(), identity in any::<bool>(), seed in 0i32..100) {
        let dims: Vec<usize> = if identity { (0..shape.len()).collect() } else { vec![] };
        let (sa, sb) = (storage(&shape, ka, seed), storage(&shape, kb, seed + 1));
        let (a, b) = (view_of(&sa, &shape, ka), view_of(&sb, &shape, kb));
        let want = ref_binary(&a, &b, &dims, i32::xla_sub);
        prop_assert!(want.is_some());
        let r = a.sub_bcast(&b, &dims).unwrap();
        prop_assert_eq!(Some(&r), want.as_ref());
        prop_assert_eq!(&numpy::sub(&a, &b).ok(), &want);
        let lt = ref_binary(&a, &b, &dims, |x, y| (x < y) as i32).map(|r| r.mapv(|v| v == 1));
        prop_assert_eq!(a.lt_bcast(&b, &dims).ok(), lt);
        // The result follows its inputs' memory order, as every fresh result does: one block,
        // no negative stride, and a transposed one when both inputs are.
        prop_assert!(r.as_slice_memory_order().is_some() && r.strides().iter().all(|&s| s >= 0));
        let transposed = |k| matches!(k, Kind::Transposed | Kind::Rotated | Kind::SteppedTransposed);
        if !transposed(ka) && !transposed(kb) {
            prop_assert!(r.is_standard_layout());
        }
        if transposed(ka) && transposed(kb) {
            prop_assert!(r.t().is_standard_layout());
        }
        // A scalar on either side: read at every index of the other operand, whose memory
        // order the result follows.
        let s = ndarray::arr0(seed - 50);
        let sv = s.view().into_dyn();
        let rs = a.sub_bcast(&s, &[]).unwrap();
        prop_assert_eq!(Some(rs.clone()), ref_binary(&a, &sv, &[], i32::xla_sub));
        let sr = s.sub_bcast(&a, &[]).unwrap();
        prop_assert_eq!(Some(sr.clone()), ref_binary(&sv, &a, &[], i32::xla_sub));
        for r in [&rs, &sr] {
            prop_assert!(r.as_slice_memory_order().is_some());
            if !transposed(ka) {
                prop_assert!(r.is_standard_layout());
            } else if shape.iter().all(|&n| n > 1) {
                prop_assert!(r.t().is_standard_layout());
            }
        }
        // Into an output of any layout (broadcast aside: it is not writable), and in place:
        // the same values, with the scalar on either side too.
        let kc = if kc == Kind::Broadcast { Kind::Stepped } else { kc };
        let mut so = storage(&shape, kc, seed + 2);
        let mut out = laid_out(so.view_mut(), &shape, kc);
        a.sub_bcast_into(&b, &dims, &mut out).unwrap();
        prop_assert_eq!(Some(&out.to_owned()), want.as_ref());
        a.sub_bcast_into(&s, &[], &mut out).unwrap();
        prop_assert_eq!(&out, &rs);
        s.sub_bcast_into(&a, &[], &mut out).unwrap();
        prop_assert_eq!(&out, &sr);
        out.assign(&a);
        out.sub_assign_bcast(&b, &dims).unwrap();
        prop_assert_eq!(Some(&out.to_owned()), want.as_ref());
        out.assign(&a);
        out.sub_assign_bcast(&s, &[]).unwrap();
        prop_assert_eq!(&out, &rs);
    }

    #[test]
    fn numpy_and_paddle_match_reference(a in small_shape(), b in small_shape(), axis in -2isize..5, seed in 0i32..50) {
        prop_assert_eq!(shape::numpy_shape(&[&a, &b]).ok(), ref_numpy_shape(&a, &b));
        prop_assert_eq!(shape::paddle_shape(&a, &b, axis).ok(), ref_paddle_shape(&a, &b, axis));
        let (sa, sb) = (storage(&a, Kind::Standard, seed), storage(&b, Kind::Reversed, seed));
        let (x, y) = (view_of(&sa, &a, Kind::Standard), view_of(&sb, &b, Kind::Reversed));
        if let Some(out) = ref_numpy_shape(&a, &b) {
            let r = numpy::add(&x, &y).unwrap();
            let xv = x.broadcast(IxDyn(&out)).unwrap();
            let yv = y.broadcast(IxDyn(&out)).unwrap();
            prop_assert_eq!(r, &xv + &yv);
        } else {
            prop_assert!(numpy::add(&x, &y).is_err());
        }
        match ref_paddle_shape(&a, &b, axis) {
            Some(out) => {
                let r = paddle::elementwise_add(&x, &y, axis).unwrap();
                prop_assert_eq!(r.shape(), out.as_slice());
            }
            None => prop_assert!(paddle::elementwise_add(&x, &y, axis).is_err()),
        }
    }

    #[test]
    fn layout_functions_match_reference(dims in prop::collection::vec(0usize..5, 0..=5), seed in 0u64..1000, k in kind()) {
        let n = dims.len();
        let mut perm: Vec<usize> = (0..n).collect();
        // A seeded permutation.
        for i in (1..n).rev() { perm.swap(i, (seed as usize * 31 + i * 17) % (i + 1)); }
        let l = Layout::new(perm).unwrap();
        let st = storage(&dims, k, seed as i32);
        let x = view_of(&st, &dims, k);
        let buf = layout::to_buffer(&x, &l).unwrap();
        let strides = l.strides(&dims).unwrap();
        for (idx, &v) in x.indexed_iter() {
            let pos: usize = idx.slice().iter().zip(&strides).map(|(i, s)| i * s).sum();
            prop_assert_eq!(buf[pos], v);
        }
    }
}

/// Shapes large enough for the engine's tiled walks (two dims of at least 256, not multiples of
/// it, so tiles come with edge strips), at rank 2 or 3 in any order.
fn tiled_shape() -> impl Strategy<Value = Vec<usize>> {
    let big = || 256usize..=280;
    prop_oneof![
        (big(), big()).prop_map(|(a, b)| vec![a, b]),
        (1usize..=3, big(), big())
            .prop_map(|(s, a, b)| vec![s, a, b])
            .prop_shuffle(),
    ]
}

/// Shapes whose blocks stage a transposed operand without tiles (two dims of 8 to 70, not
/// multiples of 8 for the most part, so the register transposes leave edges), at rank 2 or 3.
fn staged_shape() -> impl Strategy<Value = Vec<usize>> {
    let mid = || 8usize..=70;
    prop_oneof![
        (mid(), mid()).prop_map(|(a, b)| vec![a, b]),
        (1usize..=3, mid(), mid())
            .prop_map(|(s, a, b)| vec![s, a, b])
            .prop_shuffle(),
    ]
}

/// `a - b` (and friends) over `shape`, operands of the given kinds, checked against a reference:
/// fresh, into an output of the opposite memory order, in place, and a mixed-type zip.
fn walk_matches_reference(
    shape: Vec<usize>,
    ka: Kind,
    kb: Kind,
    ones: Vec<bool>,
    swap: bool,
    seed: i32,
) -> Result<(), TestCaseError> {
    let small: Vec<usize> = shape
        .iter()
        .zip(&ones)
        .map(|(&n, &one)| if one { 1 } else { n })
        .collect();
    let (ls, rs) = if swap {
        (small, shape.clone())
    } else {
        (shape.clone(), small)
    };
    let (sa, sb) = (storage(&ls, ka, seed), storage(&rs, kb, seed + 1));
    let (a, b) = (view_of(&sa, &ls, ka), view_of(&sb, &rs, kb));
    // An operand's element at an output index: size-1 dims repeat their one element. (No
    // allocation per element: this test runs under valgrind in CI.)
    fn at(x: &ArrayViewD<i32>, i: &[usize]) -> i32 {
        let mut k = [0usize; 3];
        for ((k, &i), &n) in k.iter_mut().zip(i).zip(x.shape()) {
            *k = i.min(n - 1);
        }
        x[&k[..i.len()]]
    }
    let out_shape: Vec<usize> = ls.iter().zip(&rs).map(|(&l, &r)| l.max(r)).collect();
    let want = ArrayD::from_shape_fn(IxDyn(&out_shape), |i| {
        at(&a, i.slice()).wrapping_sub(at(&b, i.slice()))
    });
    prop_assert_eq!(&a.sub_bcast(&b, &[]).unwrap(), &want);
    // Into an output in the opposite memory order: now the inputs are the transposed ones.
    let reversed: Vec<usize> = out_shape.iter().rev().copied().collect();
    let mut out = ArrayD::<i32>::zeros(IxDyn(&reversed));
    a.sub_bcast_into(&b, &[], &mut out.view_mut().reversed_axes())
        .unwrap();
    prop_assert_eq!(&out.reversed_axes(), &want);
    if want.shape() == a.shape() {
        let mut acc = a.to_owned();
        acc.sub_assign_bcast(&b, &[]).unwrap();
        prop_assert_eq!(&acc, &want);
    }
    // The new ops on the same walks: xor, an arithmetic shift by `b mod 40` (past the width
    // too), and a clamp of `a` between `b` and a scalar.
    let want = ArrayD::from_shape_fn(IxDyn(&out_shape), |i| at(&a, i.slice()) ^ at(&b, i.slice()));
    prop_assert_eq!(&a.xor_bcast(&b, &[]).unwrap(), &want);
    let amount = b.mapv(|v| v.rem_euclid(40));
    let want = ArrayD::from_shape_fn(IxDyn(&out_shape), |i| {
        at(&a, i.slice()) >> at(&amount.view(), i.slice()).min(31)
    });
    prop_assert_eq!(
        &a.shift_right_arithmetic_bcast(&amount, &[]).unwrap(),
        &want
    );
    if b.shape() == a.shape() {
        let hi = ndarray::arr0(50);
        let want = ArrayD::from_shape_fn(IxDyn(a.shape()), |i| {
            at(&a, i.slice()).max(at(&b, i.slice())).min(50)
        });
        prop_assert_eq!(&a.clamp_bcast(&b, &hi).unwrap(), &want);
        let mut acc = a.to_owned();
        acc.clamp_assign_bcast(&b, &hi).unwrap();
        prop_assert_eq!(&acc, &want);
    }
    let f = a.mapv(|v| v as f64 * 0.5);
    let u = b.mapv(|v| v as u8);
    let wide = f.zip_bcast(&u, &[], |x, y| x * f64::from(y)).unwrap();
    let agree = wide.indexed_iter().all(|(i, &v)| {
        v == f64::from(at(&a, i.slice())) * 0.5 * f64::from(at(&b, i.slice()) as u8)
    });
    prop_assert!(agree);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..config() })]

    /// Transposed, reversed, stepped and broadcast operands at tile sizes (where inputs read
    /// across their rows are staged through transposed buffers), with degenerate size-1 dims,
    /// on both sides of the op, fresh, `_into` and in place.
    #[test]
    fn tiled_walks_match_reference(
        shape in tiled_shape(),
        ka in kind(),
        kb in kind(),
        ones in prop::collection::vec(prop::bool::weighted(0.2), 3),
        swap in any::<bool>(),
        seed in 0i32..100,
    ) {
        walk_matches_reference(shape, ka, kb, ones, swap, seed)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..config() })]

    /// The same at the sizes of small walks, which stage without tiles.
    #[test]
    fn staged_walks_match_reference(
        shape in staged_shape(),
        ka in kind(),
        kb in kind(),
        ones in prop::collection::vec(prop::bool::weighted(0.2), 3),
        swap in any::<bool>(),
        seed in 0i32..100,
    ) {
        walk_matches_reference(shape, ka, kb, ones, swap, seed)?;
    }
}

#[test]
fn parallel_results_are_bit_identical_to_serial() {
    let n = 300;
    let a = ArrayD::from_shape_fn(IxDyn(&[n, 700]), |i| {
        (i[0] as f64 * 0.37 + i[1] as f64 * 1.1).sin()
    });
    let b = ArrayD::from_shape_fn(IxDyn(&[1, 700]), |i| (i[1] as f64 * 0.13).cos() + 0.5);
    let t = a.t().to_owned();
    // Every op's result as bits (NaN != NaN, so values would not do).
    let bits = |x: &ArrayD<f64>| x.iter().map(|f| f.to_bits()).collect::<Vec<u64>>();
    let run = || {
        let mut acc = a.clone();
        acc.mul_assign_bcast(&b, &[]).unwrap();
        let mask = a.gt_bcast(&b, &[]).unwrap();
        vec![
            bits(&a.add_bcast(&b, &[]).unwrap()),
            bits(&a.div_bcast(&b, &[]).unwrap()),
            bits(&a.pow_bcast(&b, &[]).unwrap()),
            bits(&a.max_bcast(&b, &[]).unwrap()),
            bits(&a.rem_bcast(&b, &[]).unwrap()),
            bits(&t.t().sub_bcast(&b, &[]).unwrap()),
            bits(&a.atan2_bcast(&b, &[]).unwrap()),
            bits(
                &a.clamp_bcast(&ndarray::arr0(-0.5), &ndarray::arr0(0.5))
                    .unwrap(),
            ),
            mask.iter().map(|&m| m as u64).collect(),
            bits(&mask.select_bcast(&a, &b).unwrap()),
            bits(&acc),
            bits(&a.reduce_in_dim(&[1, 700], &[0, 1]).unwrap()),
            bits(&a.reduce_in_dim(&[n, 1], &[0, 1]).unwrap()),
            layout::to_buffer(&a, &Layout::col_major(2))
                .unwrap()
                .iter()
                .map(|f| f.to_bits())
                .collect(),
        ]
    };
    let serial = with_parallelism(Parallelism::Serial, run);
    let parallel = with_parallelism(Parallelism::Auto, run);
    let capped = with_parallelism(Parallelism::Threads(2), run);
    assert_eq!(serial, parallel);
    assert_eq!(serial, capped);
}
