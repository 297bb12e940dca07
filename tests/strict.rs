//! `Strict` arrays: ndarray's own operator tests (`tests/oper.rs`: the cases, rewritten) run
//! through the strict type where XLA's rule allows them, every rank promotion ndarray performs
//! refused at the caller's line, every operand form, and chained expressions against the
//! `_bcast` methods.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use ndarray::{arr0, array, s, Array, Array1, Array2, ArrayD, ArrayRef, IxDyn};
use proptest::prelude::*;
use xla_bcast::prelude::*;

/// ndarray's `operations` test: each op on `[1, 2, 3, 4]`-style operands at shapes `(4)`,
/// `(2, 2)` and `(1, 2, 1, 2)`, fresh and in place.
#[test]
fn ndarray_operations() {
    type Case = (&'static str, [f32; 4], [f32; 4], [f32; 4]);
    let cases: [Case; 6] = [
        ("+", [1., 2., 3., 4.], [0., 1., 2., 3.], [1., 3., 5., 7.]),
        ("-", [1., 2., 3., 4.], [0., 1., 2., 3.], [1., 1., 1., 1.]),
        ("*", [1., 2., 3., 4.], [0., 1., 2., 3.], [0., 2., 6., 12.]),
        (
            "/",
            [1., 2., 3., 4.],
            [1., 1., 2., 3.],
            [1., 2., 1.5, 4. / 3.],
        ),
        ("%", [1., 2., 3., 4.], [1., 1., 2., 3.], [0., 0., 1., 1.]),
        (
            "neg",
            [1., 2., 3., 4.],
            [1., 1., 2., 3.],
            [-1., -2., -3., -4.],
        ),
    ];
    for (op, a, b, c) in cases {
        for shape in [&[4][..], &[2, 2], &[1, 2, 1, 2]] {
            let arr = |v: [f32; 4]| ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap();
            let (a, b, c) = (arr(a), arr(b), arr(c));
            let mut acc = a.clone().into_strict();
            let fresh = match op {
                "+" => {
                    acc += &b;
                    a.strict() + &b
                }
                "-" => {
                    acc -= &b;
                    a.strict() - &b
                }
                "*" => {
                    acc *= &b;
                    a.strict() * &b
                }
                "/" => {
                    acc /= &b;
                    a.strict() / &b
                }
                "%" => {
                    acc %= &b;
                    a.strict() % &b
                }
                _ => {
                    acc = -acc;
                    -a.strict()
                }
            };
            assert_eq!(fresh, c, "{op} at {shape:?}");
            assert_eq!(acc, c, "{op}= at {shape:?}");
        }
    }
}

/// ndarray's `scalar_operations`: `x += 1.` and `x + arr0(1.)` at ranks 0, 1 and 2.
#[test]
fn ndarray_scalar_operations() {
    let a = arr0::<f32>(1.).into_dyn();
    let b = Array1::<f32>::from_elem(2, 1.).into_dyn();
    let c = Array2::<f32>::from_elem((2, 2), 1.).into_dyn();
    for x in [a, b, c] {
        let mut y = x.clone().into_strict();
        y += 1.;
        assert_eq!(y, x.strict() + &arr0(1.));
        assert_eq!(y, x.mapv(|_| 2.));
        assert_eq!(y, 1. + x.strict());
    }
}

/// ndarray's `scaled_add_2` and `_3`: `answer += &(beta * &c)` on views stepped by 1, 2, -1
/// and -2. Where `c` is a vector against a matrix, ndarray promotes its rank; here it panics.
#[test]
fn ndarray_scaled_add() {
    let beta = -2.3;
    let range = |m: usize, n: usize| {
        Array::from_iter((0..m * n).map(|v| v as f64))
            .into_shape_with_order((m, n))
            .unwrap()
    };
    let sizes = [
        (4, 4, 1, 4),
        (8, 8, 1, 8),
        (17, 15, 17, 15),
        (4, 17, 4, 17),
        (17, 3, 1, 3),
        (67, 63, 1, 63),
    ];
    for s1 in [1, 2, -1, -2] {
        for s2 in [1, 2, -1, -2] {
            for (m, k, n, q) in sizes {
                let a = range(m, k);
                let c = range(n, q);
                let mut answer = a.clone();
                let cv = c.slice(s![..;s1, ..;s2]);
                {
                    let mut av = answer.slice_mut(s![..;s1, ..;s2]).into_strict();
                    av += &(beta * cv.strict());
                }
                let mut want = a.clone();
                want.slice_mut(s![..;s1, ..;s2]).scaled_add(beta, &cv);
                assert_eq!(answer, want);
                if n == 1 {
                    // The `_3` variant: `c` as a vector, which ndarray right-aligns.
                    let vector = c.row(0).slice(s![..;s2]).to_owned();
                    let promoted = catch_unwind(AssertUnwindSafe(|| {
                        let mut av = a.clone().into_strict();
                        av.slice_collapse(s![..;s1, ..;s2]);
                        av += &(beta * vector.strict());
                    }));
                    assert!(promoted.is_err(), "a rank promotion went through");
                }
            }
        }
    }
}

/// ndarray's `test_add` (in `tests/array.rs`): a shared (`ArcArray`) 2x2 of `0..4` added to
/// itself, and its scalar arithmetic on shared storage and on mutable views.
#[test]
fn ndarray_shared_and_view_arithmetic() {
    let mut a = ndarray::ArcArray::<usize, _>::zeros((2, 2));
    for (i, elt) in a.iter_mut().enumerate() {
        *elt = i;
    }
    let b = a.clone();
    let sum = a.into_strict() + &b;
    assert_eq!(
        [sum[[0, 0]], sum[[0, 1]], sum[[1, 0]], sum[[1, 1]]],
        [0, 2, 4, 6]
    );
    let mut m = Array2::<f64>::zeros((3, 4));
    {
        let mut col = m.column_mut(1).into_strict();
        col += 1.0;
        col *= &arr0(3.0);
    }
    let mut row = m.row_mut(2).into_strict();
    row -= &array![1.0, 1.0, 1.0, 1.0];
    assert_eq!(m.column(1), array![3.0, 3.0, 2.0]);
    assert_eq!(m.row(2), array![-1.0, 2.0, -1.0, -1.0]);
}

/// Where ndarray promotes a rank, the strict type panics, with the error's message and the
/// caller's line; the `_bcast` method returns the same error.
#[test]
fn rank_promotions_panic_at_the_callers_line() {
    // The hook runs on the panicking thread: a thread-local keeps other tests' panics out.
    thread_local! {
        static LOCATION: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
    }
    let x = Array2::<i64>::ones((2, 3));
    let v = Array1::<i64>::ones(3);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| l.file().to_string())
            .unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        LOCATION.with(|l| *l.borrow_mut() = Some((at, message)));
    }));
    type Promotion<'a> = (&'static str, Box<dyn Fn() + 'a>);
    let promotions: [Promotion; 6] = [
        ("+", Box::new(|| drop(x.strict() + &v))),
        ("-", Box::new(|| drop(&x.strict() - v.view()))),
        ("*", Box::new(|| drop(x.strict() * v.clone()))),
        (
            "& ArrayRef",
            Box::new(|| drop(x.strict() & (&*v as &ArrayRef<i64, _>))),
        ),
        (
            "+=",
            Box::new(|| {
                let mut s = x.clone().into_strict();
                s += &v;
            }),
        ),
        ("chain", Box::new(|| drop(x.strict() + &x - &v))),
    ];
    let mut seen = vec![];
    for (what, f) in promotions {
        assert!(catch_unwind(AssertUnwindSafe(f)).is_err(), "{what}");
        seen.push((what, LOCATION.with(|l| l.borrow_mut().take())));
    }
    std::panic::set_hook(previous);
    let err = x.add_bcast(&v, &[]).unwrap_err().to_string();
    for (what, caught) in seen {
        let (file, message) = caught.expect("the hook saw the panic");
        assert!(
            file.ends_with("strict.rs") && file.starts_with("tests"),
            "{what}: {file}"
        );
        assert!(
            message.contains("have different ranks"),
            "{what}: {message}"
        );
        if what == "+" {
            assert_eq!(message, err);
        }
    }
}

/// Every operand form ndarray's operators take, on either side, and the results stay strict.
#[test]
fn every_operand_form() {
    let a = array![[1i32, 2, 3], [4, 5, 6]];
    let b = array![[10i32, 20, 30]];
    let r: &ArrayRef<i32, _> = &b;
    let want = array![[11, 22, 33], [14, 25, 36]];
    assert_eq!(a.strict() + &b, want);
    assert_eq!(a.strict() + b.view(), want);
    assert_eq!(a.strict() + b.clone(), want);
    assert_eq!(a.strict() + r, want);
    assert_eq!(&a.strict() + &b, want);
    assert_eq!(a.strict() + b.strict(), want);
    assert_eq!(a.strict() + &b.strict(), want);
    assert_eq!(a.clone().into_strict() + &b, want);
    assert_eq!(a.view().into_strict() + &b, want);
    assert_eq!(b.strict() + &a, want); // the smaller operand first
                                       // A plain array on the left of a strict one: strict too.
    let left: StrictArray<i32, _> = &b + a.strict();
    assert_eq!(left, want);
    assert_eq!(b.clone() + &a.strict(), want);
    assert!(catch_unwind(AssertUnwindSafe(|| &array![1, 2, 3] + a.strict())).is_err());
    // Scalars on either side, unary operators, the bit operators.
    assert_eq!(2 * a.strict() - 1, a.mapv(|x| 2 * x - 1));
    assert_eq!(10 - a.strict(), a.mapv(|x| 10 - x));
    assert_eq!(-a.strict(), a.mapv(|x| -x));
    assert_eq!(!a.strict(), a.mapv(|x| !x));
    assert_eq!((a.strict() & 6) | 1, a.mapv(|x| (x & 6) | 1));
    assert_eq!(a.strict() ^ &b, a.xor_bcast(&b, &[]).unwrap());
    assert_eq!(a.strict() << 2, a.mapv(|x| x << 2));
    assert_eq!(a.strict() >> &arr0(1), a.mapv(|x| x >> 1));
    assert_eq!(100 % a.strict(), a.mapv(|x| 100 % x));
    // The whole expression stays strict: a rank promotion late in a chain still panics.
    let s: StrictArray<i32, _> = a.strict() * 2 + &b;
    assert!(catch_unwind(AssertUnwindSafe(|| s + &array![1, 2, 3])).is_err());
    // Every assign form.
    let mut acc = a.clone().into_strict();
    acc += &b;
    acc -= b.view();
    acc *= b.strict();
    acc /= &b.strict();
    acc %= 7;
    acc ^= r;
    acc <<= b.clone();
    acc >>= 1;
    let mut want = a.clone();
    for ((_, j), w) in want.indexed_iter_mut() {
        let b = b[[0, j]];
        *w = (((*w * b / b) % 7) ^ b) << b >> 1;
    }
    assert_eq!(acc, want);
    // Deref and into_inner: ndarray's methods, then plain arrays again.
    let total: i32 = (a.strict() + 1).sum();
    assert_eq!(total, 27);
    let plain: Array2<f64> = (array![[1.0]].strict() * 2.0).into_inner();
    assert_eq!(plain, array![[2.0]]);
}

/// An operator, applied both ways: to strict arrays and through the `_bcast` methods.
#[derive(Debug, Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Max,
    Xor,
    Shl,
}

fn apply(op: Op, l: StrictArray<i32, IxDyn>, r: &ArrayD<i32>) -> StrictArray<i32, IxDyn> {
    match op {
        Op::Add => l + r,
        Op::Sub => &l - r,
        Op::Mul => l * r.view(),
        // No `max` operator: the method, on the strict array through Deref.
        Op::Max => l.max_bcast(r, &[]).unwrap().into_strict(),
        Op::Xor => l ^ r,
        Op::Shl => l << r,
    }
}

fn reference(op: Op, l: &ArrayD<i32>, r: &ArrayD<i32>) -> Result<ArrayD<i32>, BroadcastError> {
    match op {
        Op::Add => l.add_bcast(r, &[]),
        Op::Sub => l.sub_bcast(r, &[]),
        Op::Mul => l.mul_bcast(r, &[]),
        Op::Max => l.max_bcast(r, &[]),
        Op::Xor => l.xor_bcast(r, &[]),
        Op::Shl => l.shift_left_bcast(r, &[]),
    }
}

fn operand(shape: Vec<usize>, seed: i32) -> ArrayD<i32> {
    let n: usize = shape.iter().product();
    let values = (0..n as i32).map(|v| (v * 31 + seed) % 23 - 11).collect();
    ArrayD::from_shape_vec(IxDyn(&shape), values).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Chains of 3 to 6 operators over random shapes (equal ranks with size-1 dims, sometimes
    /// rank 0, sometimes a mismatch) agree with the `_bcast` methods step by step, and panic
    /// exactly where a method returns an error.
    #[test]
    fn chained_expressions_match_the_methods(
        base in prop::collection::vec(1usize..5, 1..4),
        steps in prop::collection::vec((0usize..6, prop::collection::vec(0usize..4, 3), 0i32..50), 3..7),
    ) {
        let ops = [Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Xor, Op::Shl];
        let mut want = Ok(operand(base.clone(), 0));
        let mut got = Some(operand(base.clone(), 0).into_strict());
        for (k, dims, seed) in steps {
            // Each dim: the base's, 1, or (rarely) another size; sometimes a scalar.
            let shape: Vec<usize> = if dims[0] == 3 && dims[1] == 3 {
                vec![]
            } else {
                base.iter().zip(dims.iter().cycle()).map(|(&n, &d)| match d {
                    0 | 1 => n,
                    2 => 1,
                    _ => n + 1,
                }).collect()
            };
            let r = operand(shape, seed);
            let op = ops[k];
            want = want.and_then(|w| reference(op, &w, &r));
            got = got.and_then(|g| catch_unwind(AssertUnwindSafe(|| apply(op, g, &r))).ok());
            match (&want, &got) {
                (Ok(w), Some(g)) => prop_assert_eq!(g, w),
                (Err(_), None) => break,
                _ => prop_assert!(false, "{:?}: method {:?}, operator {:?}", op, want.is_ok(), got.is_some()),
            }
        }
    }
}

/// A chain of operators on an owned array writes into that array's buffer wherever the result
/// has its shape (as ndarray's `a + &b` does): only the first op of such a chain allocates,
/// and the results are those of fresh arrays. Views, references and shared arrays are never
/// written.
#[test]
fn owned_chains_reuse_their_buffer() {
    use ndarray::{Array2, ShapeBuilder};
    let (m, n) = (64, 48);
    let x = Array2::from_shape_fn((m, n), |(i, j)| (i * n + j) as f64 * 0.5 - 7.0);
    let mu = Array2::from_shape_fn((m, 1), |(i, _)| i as f64 * 0.25);
    let g = Array2::from_shape_fn((1, n), |(_, j)| 1.0 + j as f64 * 0.125);
    let beta = Array2::from_shape_fn((1, n), |(_, j)| j as f64 - 3.0);
    let want = (&x.strict() - &mu) * &g + &beta;
    for fortran in [false, true] {
        let owned = match fortran {
            false => x.clone(),
            true => {
                let mut f = Array2::zeros((m, n).f());
                f.assign(&x);
                f
            }
        };
        let before = owned.as_ptr();
        let y = ((owned.into_strict() - &mu) * &g + &beta) * 2.0;
        assert_eq!(y.into_inner().as_ptr(), before, "fortran: {fortran}");
    }
    let y = ((x.clone().into_strict() - &mu) * &g + &beta) * 2.0;
    assert_eq!(y, &want * 2.0);
    // A view lhs is read, never written; a result of another shape gets a fresh array.
    let copy = x.clone();
    let _ = x.view().into_strict() - &mu;
    assert_eq!(x, copy);
    let col = mu.clone().into_strict() + &g;
    assert_eq!(col.shape(), &[m, n]);
}

/// `in_dims`: a lower-rank operand with its `broadcast_dimensions` in a strict expression gives
/// the `_bcast` methods' results, on either side and in place, and a chain on an owned array
/// writes into that array's buffer (the layer norm, one allocation).
#[test]
#[allow(clippy::op_ref)] // every operand form, borrowed ones included
fn in_dims_operands_follow_xlas_rule_and_lend_the_owned_buffer() {
    let (m, n) = (37, 29);
    let x = Array2::from_shape_fn((m, n), |(i, j)| (i * n + j) as f64 * 0.37 - 11.0);
    let mu = Array1::from_shape_fn(m, |i| i as f64 * 0.25);
    let rstd = Array1::from_shape_fn(m, |i| 1.0 / (1.0 + i as f64));
    let g = Array1::from_shape_fn(n, |j| 1.0 + j as f64 * 0.125);
    let beta = Array1::from_shape_fn(n, |j| j as f64 - 3.0);
    let want = x
        .sub_bcast(&mu, &[0])
        .unwrap()
        .mul_bcast(&rstd, &[0])
        .unwrap()
        .mul_bcast(&g, &[1])
        .unwrap()
        .add_bcast(&beta, &[1])
        .unwrap();

    let owned = x.clone();
    let buffer = owned.as_ptr();
    let y = (owned.into_strict() - mu.in_dims(&[0])) * rstd.in_dims(&[0]) * g.in_dims(&[1])
        + beta.in_dims(&[1]);
    assert_eq!(y.as_ptr(), buffer, "the chain allocated");
    assert_eq!(y, want);

    // Borrowed lhs: a fresh result, the same values; `x` untouched.
    let y =
        (x.strict() - mu.in_dims(&[0])) * rstd.in_dims(&[0]) * g.in_dims(&[1]) + beta.in_dims(&[1]);
    assert_eq!(y, want);
    // A plain ndarray lhs gives a strict result too.
    let y: StrictArray<f64, _> = &x - mu.in_dims(&[0]);
    assert_eq!(y, x.sub_bcast(&mu, &[0]).unwrap());

    // On the left, the op's order is kept; an owned rhs lends its buffer.
    let owned = x.clone();
    let buffer = owned.as_ptr();
    let y = g.in_dims(&[1]) - owned.into_strict();
    assert_eq!(y.as_ptr(), buffer);
    assert_eq!(y, g.broadcast((m, n)).unwrap().to_owned() - &x);
    let y = mu.in_dims(&[0]) / &x.strict();
    assert_eq!(y, mu.div_bcast(&x, &[0]).unwrap());
    let m = mu.in_dims(&[0]);
    let y = x.strict() / m;
    assert_eq!(y, x.div_bcast(&mu, &[0]).unwrap());
    let y = m / x.strict();
    assert_eq!(y, mu.div_bcast(&x, &[0]).unwrap());

    // In place.
    let mut acc = x.clone().into_strict();
    acc -= mu.in_dims(&[0]);
    acc *= g.in_dims(&[1]);
    assert_eq!(
        acc,
        x.sub_bcast(&mu, &[0]).unwrap().mul_bcast(&g, &[1]).unwrap()
    );

    // Degenerate dims broadcast too: a (1, n) operand placed at dims [1, 2] of a 3-D array.
    let cube = Array::from_shape_fn((2, 3, n), |(a, b, c)| (a * 100 + b * 10 + c) as f64);
    let row = g.view().insert_axis(ndarray::Axis(0));
    let y = cube.strict() * row.in_dims(&[1, 2]);
    assert_eq!(y, cube.mul_bcast(&row, &[1, 2]).unwrap());
}

/// `in_dims` refuses what XLA's rule refuses, with the `_bcast` methods' errors as panics, and
/// an `in_dims` operand of the higher rank.
#[test]
fn in_dims_errors_panic_with_the_rules_message() {
    let x = Array2::<f64>::ones((2, 3));
    let v = Array1::<f64>::ones(2);
    let message = |f: &dyn Fn()| {
        let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("panics");
        payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    };
    let err = x.sub_bcast(&v, &[1]).unwrap_err().to_string();
    assert_eq!(message(&|| drop(x.strict() - v.in_dims(&[1]))), err);
    let err = x.sub_bcast(&v, &[0, 1]).unwrap_err().to_string();
    assert_eq!(message(&|| drop(x.strict() - v.in_dims(&[0, 1]))), err);
    let m = message(&|| drop(v.strict() + x.in_dims(&[0, 1])));
    assert!(m.contains("in_dims") && m.contains("[2, 3]"), "{m}");
    let m = message(&|| {
        let mut acc = x.clone().into_strict();
        acc += v.in_dims(&[1]);
    });
    assert_eq!(m, x.add_bcast(&v, &[1]).unwrap_err().to_string());
}

/// An `InDims` operand borrowed (`&v.in_dims(..)`) works as one by value; scaled, it is the
/// array that is scaled first.
#[test]
fn in_dims_borrowed_and_scaled() {
    let x = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let g = array![1.0, 10.0, 100.0];
    let placed = g.in_dims(&[1]);
    let by_ref = x.strict() * placed;
    let by_value = x.strict() * placed;
    assert_eq!(by_ref, by_value);
    let mut y = x.clone().into_strict();
    y += &placed;
    assert_eq!(y, array![[2.0, 12.0, 103.0], [5.0, 15.0, 106.0]]);
    let scaled = x.strict() * (&g * 2.0).in_dims(&[1]);
    assert_eq!(scaled, &by_ref * 2.0);
}
