//! The adjoint of broadcasting: `reduce_in_dim`, `unbroadcast_grads`, `sum_to_shape`.

use ndarray::{array, Array, ArrayD, Dimension, IxDyn};
use proptest::prelude::*;
use xla_bcast::prelude::*;
use xla_bcast::{numpy, paddle, reduce, with_parallelism, Parallelism};

/// Sum of `y` over every output index that maps to each operand index: the definition.
fn naive_reduce(y: &ArrayD<f64>, operand: &[usize], dims: &[usize]) -> ArrayD<f64> {
    let mut out = ArrayD::zeros(IxDyn(operand));
    for (idx, &v) in y.indexed_iter() {
        let src: Vec<usize> = dims
            .iter()
            .enumerate()
            .map(|(i, &d)| if operand[i] == 1 { 0 } else { idx[d] })
            .collect();
        out[src.as_slice()] += v;
    }
    out
}

#[test]
fn sum_to_size_rule() {
    // size must be broadcastable to the tensor's size.
    let x = ArrayD::from_shape_fn(IxDyn(&[3, 3, 3, 3, 3, 3]), |i| (i[1] + 10 * i[3]) as f64);
    let r = numpy::sum_to_shape(&x, &[1, 3, 1, 3]).unwrap();
    assert_eq!(r.shape(), &[1, 3, 1, 3]);
    // Summed over x's dims 0, 1, 2 and 4: 27 copies of (0 + 1 + 2) + 3 * 10 * 2.
    assert_eq!(r[[0, 2, 0, 1]], 27.0 * (3.0 + 60.0));
    assert_eq!(numpy::sum_to_shape(&x, &[]).unwrap().sum(), x.sum());
    assert!(numpy::sum_to_shape(&x, &[2]).is_err());
    assert!(numpy::sum_to_shape(&x, &[1, 1, 1, 1, 1, 1, 1]).is_err());
    let g = array![[1, 2], [3, 4]];
    assert_eq!(
        numpy::sum_to_shape(&g, &[2, 2]).unwrap(),
        g.clone().into_dyn()
    );
}

#[test]
fn grads_of_binary_ops() {
    let grad = Array::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 12 + j * 4 + k) as i64);
    let (gl, gr) = reduce::unbroadcast_grads(&[2, 3, 4], &[3, 4], &[1, 2], &grad).unwrap();
    assert_eq!(gl, grad.clone().into_dyn());
    assert_eq!(
        gr,
        (&grad.index_axis(ndarray::Axis(0), 0) + &grad.index_axis(ndarray::Axis(0), 1)).into_dyn()
    );
    let (ga, gb) = reduce::unbroadcast_grads(&[2, 1, 4], &[1, 3, 1], &[], &grad).unwrap();
    assert_eq!(ga.shape(), &[2, 1, 4]);
    assert_eq!(gb.shape(), &[1, 3, 1]);
    assert_eq!(ga.sum(), grad.sum());
    assert_eq!(gb.sum(), grad.sum());
    // The gradient must have the result's shape.
    let err = reduce::unbroadcast_grads(&[2, 3, 4], &[4], &[2], &Array::<i64, _>::zeros((2, 3)))
        .unwrap_err();
    assert!(matches!(err, BroadcastError::ArgumentShape { .. }));
    assert_eq!(
        err.to_string(),
        "unbroadcast_grads: grad, the gradient of the op's result, has shape [2, 3] but must \
         have shape [2, 3, 4]"
    );
    assert!(reduce::unbroadcast_grads(&[2, 3, 4], &[4], &[], &grad).is_err());
    let (na, nb) = numpy::unbroadcast_grads(&[3, 1], &[2, 1, 4], &grad).unwrap();
    assert_eq!((na.shape(), nb.shape()), (&[3, 1][..], &[2, 1, 4][..]));
    assert!(matches!(
        numpy::unbroadcast_grads(&[3, 1], &[2, 1, 5], &grad),
        Err(BroadcastError::ArgumentShape { .. })
    ));
}

#[test]
fn paddle_grads_keep_trailing_ones() {
    let grad = Array::from_shape_fn((2, 3, 4), |(i, j, k)| (i + j + k) as f32);
    let (gx, gy) = paddle::unbroadcast_grads(&[2, 3, 4], &[3, 1], 1, &grad).unwrap();
    assert_eq!(gx, grad.clone().into_dyn());
    assert_eq!(gy.shape(), &[3, 1]);
    assert_eq!(gy[[1, 0]], grad.index_axis(ndarray::Axis(1), 1).sum());
    let (gx, gy) = paddle::unbroadcast_grads(&[1, 3], &[2, 3, 4], 0, &grad).unwrap();
    assert_eq!(gx.shape(), &[1, 3]);
    assert_eq!(gy, grad.clone().into_dyn());
    assert!(paddle::unbroadcast_grads(&[2, 3, 4], &[4], 1, &grad).is_err());
}

#[test]
fn large_reductions_match_naive_and_are_thread_independent() {
    let y = ArrayD::from_shape_fn(IxDyn(&[300, 517]), |i| {
        ((i[0] * 31 + i[1] * 7) % 13) as f64 * 0.1
    });
    for (operand, dims) in [
        (vec![1, 517], vec![0, 1]),
        (vec![300, 1], vec![0, 1]),
        (vec![517], vec![1]),
        (vec![], vec![]),
    ] {
        let serial = with_parallelism(Parallelism::Serial, || {
            y.reduce_in_dim(&operand, &dims).unwrap()
        });
        let parallel = with_parallelism(Parallelism::Auto, || {
            y.reduce_in_dim(&operand, &dims).unwrap()
        });
        let two = with_parallelism(Parallelism::Threads(2), || {
            y.reduce_in_dim(&operand, &dims).unwrap()
        });
        assert_eq!(serial, parallel);
        assert_eq!(serial, two);
        let naive = naive_reduce(&y, &operand, &dims);
        for (a, b) in serial.iter().zip(naive.iter()) {
            assert!((a - b).abs() < 1e-9 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}

/// A sum down the rows adds each column's elements in index order up to 64 rows, one rounding
/// per add; past that, groups of 64 rows in order, the groups' sums pairwise (halves, the
/// first the larger): the error grows with the log of the rows, not the rows. The same bits on any
/// number of threads.
#[test]
fn column_sums_add_pairwise_over_groups_of_rows() {
    // Halves, the first the larger, down to single groups.
    fn pairwise(sums: &[f32]) -> f32 {
        match sums.len() {
            1 => sums[0],
            n => pairwise(&sums[..n.div_ceil(2)]) + pairwise(&sums[n.div_ceil(2)..]),
        }
    }
    for rows in [1, 3, 5, 8, 64, 65, 130, 300] {
        let y = Array::from_shape_fn((rows, 23), |(i, j)| {
            ((i * 31 + j * 17) % 101) as f32 * 0.013 - 0.4
        });
        let got = y.reduce_in_dim(&[1, 23], &[0, 1]).unwrap();
        let two = with_parallelism(Parallelism::Threads(2), || {
            y.reduce_in_dim(&[1, 23], &[0, 1]).unwrap()
        });
        assert_eq!(got, two);
        for j in 0..23 {
            let col: Vec<f32> = y.column(j).to_vec();
            let want = match rows > 64 {
                false => col.iter().fold(0.0f32, |acc, &v| acc + v),
                true => {
                    let groups: Vec<f32> = col
                        .chunks(64)
                        .map(|g| g.iter().fold(0.0f32, |a, &v| a + v))
                        .collect();
                    0.0 + pairwise(&groups)
                }
            };
            assert_eq!(
                got[[0, j]].to_bits(),
                want.to_bits(),
                "{rows} rows, column {j}"
            );
        }
    }
}

/// A sum over dims that a kept dim separates in memory (`(A, 2, C, 16)` to `(2, 16)`: `A` and
/// `C` cannot merge; and the same with the innermost dim folded too) is pairwise over all of
/// them: its error against `f64` stays at the log of the length (adding the blocks along `A`
/// in turn was off by 1.3e-5 in both). The program's `reduce_sum`, run and compiled, gives
/// the same bits, and so do two threads.
#[test]
fn sums_over_separated_dims_are_pairwise() {
    use xla_bcast::stablehlo::{Program, Tensor};
    let cases: [(&[usize], &[usize], &[usize]); 2] = [
        (&[256, 2, 64, 16], &[2, 16], &[1, 3]),
        (&[64, 2, 16, 3, 64], &[2, 3], &[1, 3]),
    ];
    for (shape, out, dims) in cases {
        let x = ArrayD::<f32>::from_shape_fn(IxDyn(shape), |i| {
            let k: usize = i
                .as_array_view()
                .iter()
                .enumerate()
                .map(|(d, &v)| v * (d + 3))
                .sum();
            0.1 + (k % 17) as f32 * 1e-3
        });
        let got: ArrayD<f32> = x.reduce_in_dim(out, dims).unwrap();
        let wide = x.mapv(f64::from).reduce_in_dim(out, dims).unwrap();
        for (g, w) in got.iter().zip(&wide) {
            let err = ((f64::from(*g) - w) / w).abs();
            assert!(err < 1e-6, "{shape:?}: relative error {err:e}");
        }
        let two = with_parallelism(Parallelism::Threads(2), || {
            x.reduce_in_dim(out, dims).unwrap()
        });
        assert_eq!(got, two);
        let mut p = Program::new("separated_sum");
        let px = p.parameter::<f32>(shape);
        let folded: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
        let s = p.reduce_sum(px, &folded).unwrap();
        p.output(s).unwrap();
        let input = [Tensor::from(x.clone())];
        let bits = |t: &Tensor| match t {
            Tensor::F32(t) => t.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            _ => panic!("an f32 sum"),
        };
        let want: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits(&p.run(&input).unwrap()[0]), want, "{shape:?}");
        let exe = p.compile().unwrap();
        assert_eq!(bits(&exe.run(&input).unwrap()[0]), want, "{shape:?}");
    }
}

#[test]
fn generic_reductions() {
    let y = array![[3.0, -1.0, f64::NAN], [2.0, 5.0, 1.0]];
    let mx = y
        .reduce_in_dim_with(&[2, 1], &[0, 1], f64::NEG_INFINITY, f64::max)
        .unwrap();
    assert_eq!(mx, array![[3.0], [5.0]].into_dyn());
    let mn = y
        .reduce_in_dim_with(&[3], &[1], f64::INFINITY, |a: f64, b: f64| a.xla_min(b))
        .unwrap();
    assert!(mn[2].is_nan());
    let mut out = Array::from_elem((1, 3), 0.0);
    y.reduce_in_dim_with_into(&[0, 1], 1.0, |a, b| a * b, &mut out)
        .unwrap();
    assert_eq!(out[[0, 1]], -5.0);
    let mut wrong = Array::from_elem(4, 7.0);
    assert!(y.reduce_in_dim_into(&[1], &mut wrong).is_err());
    assert!(wrong.iter().all(|&x| x == 7.0));
}

fn case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>)> {
    // An output shape, then an operand that broadcasts to it with shuffled dims.
    prop::collection::vec(1usize..5, 0..=4).prop_flat_map(|out| {
        let n = out.len();
        (
            Just(out),
            Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
            0..=n,
            prop::collection::vec(any::<bool>(), n),
        )
            .prop_map(|(out, perm, k, ones)| {
                let dims: Vec<usize> = perm[..k].to_vec();
                let operand: Vec<usize> = dims
                    .iter()
                    .zip(&ones)
                    .map(|(&d, &one)| if one { 1 } else { out[d] })
                    .collect();
                (out, operand, dims)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn adjoint_identity((out, operand, dims) in case(), seed in 0u64..1000) {
        let val = |i: usize, salt: u64| ((i as u64 * 2654435761 + seed * 97 + salt) % 17) as f64 - 8.0;
        let n: usize = operand.iter().product();
        let m: usize = out.iter().product();
        let x = ArrayD::from_shape_vec(IxDyn(&operand), (0..n).map(|i| val(i, 1)).collect()).unwrap();
        let y = ArrayD::from_shape_vec(IxDyn(&out), (0..m).map(|i| val(i, 2)).collect()).unwrap();
        let bx = x.broadcast_in_dim(&out, &dims).unwrap();
        let ry = y.reduce_in_dim(&operand, &dims).unwrap();
        prop_assert_eq!((&bx * &y).sum(), (&x * &ry).sum());
        prop_assert_eq!(&ry, &naive_reduce(&y, &operand, &dims));
    }
}

/// `f` folded over every element of `y` in row-major order, per operand index: the definition
/// for an associative `f` that need not commute.
fn ordered_fold<T: Clone>(
    y: &ArrayD<T>,
    operand: &[usize],
    dims: &[usize],
    identity: T,
    f: impl Fn(T, T) -> T,
) -> ArrayD<T> {
    let mut out = ArrayD::from_elem(IxDyn(operand), identity);
    for (idx, v) in y.indexed_iter() {
        let src: Vec<usize> = dims
            .iter()
            .enumerate()
            .map(|(i, &d)| if operand[i] == 1 { 0 } else { idx[d] })
            .collect();
        let slot = &mut out[src.as_slice()];
        *slot = f(slot.clone(), v.clone());
    }
    out
}

/// 2x2 integer matrices (wrapping): associative, not commutative.
type Mat = [u64; 4];
fn matmul(a: Mat, b: Mat) -> Mat {
    let m = |x: u64, y: u64| x.wrapping_mul(y);
    [
        m(a[0], b[0]).wrapping_add(m(a[1], b[2])),
        m(a[0], b[1]).wrapping_add(m(a[1], b[3])),
        m(a[2], b[0]).wrapping_add(m(a[3], b[2])),
        m(a[2], b[1]).wrapping_add(m(a[3], b[3])),
    ]
}

/// `reduce_in_dim_with` keeps index order for a closure that does not commute: string
/// concatenation and a product of matrices, over contiguous, transposed and reversed sources,
/// every fold pattern (inner, outer, both, degenerate), at serial and parallel sizes, with one
/// thread and with two.
#[test]
fn non_commutative_reductions_keep_index_order() {
    // (rows, cols): 8x12 and 11x5 are serial (11 rows: folded four at a time, then three
    // left over); 96x300 (28,800 Strings, 24 bytes each) is above the parallel threshold.
    for (rows, cols) in [(8usize, 12usize), (11, 5), (96, 300)] {
        let words = ArrayD::from_shape_fn(IxDyn(&[rows, cols]), |i| format!("{},{};", i[0], i[1]));
        let mats = ArrayD::from_shape_fn(IxDyn(&[rows, cols]), |i| {
            let (a, b) = (i[0] as u64, i[1] as u64);
            [a + 1, b + 2, a * b + 3, 1]
        });
        let patterns: [(&[usize], &[usize]); 5] = [
            (&[cols], &[1]),
            (&[rows], &[0]),
            (&[], &[]),
            (&[rows, 1], &[0, 1]),
            (&[1, cols], &[0, 1]),
        ];
        for threads in [Parallelism::Serial, Parallelism::Threads(2)] {
            with_parallelism(threads, || {
                for (operand, dims) in patterns {
                    let cat = |a: String, b: String| a + &b;
                    let want = ordered_fold(&words, operand, dims, String::new(), cat);
                    let t = words.t().to_owned(); // the same values, transposed in memory
                    let sources = [
                        words.view(),
                        t.t(),
                        words.slice(ndarray::s![.., ..]).into_dyn(),
                    ];
                    for src in sources {
                        let got = src.reduce_in_dim_with(operand, dims, String::new(), cat);
                        assert_eq!(got.unwrap(), want, "{rows}x{cols} -> {operand:?}");
                    }
                    let mut out = ArrayD::from_elem(IxDyn(operand), "stale".to_string());
                    words
                        .reduce_in_dim_with_into(dims, String::new(), cat, &mut out)
                        .unwrap();
                    assert_eq!(out, want);

                    let id: Mat = [1, 0, 0, 1];
                    let want = ordered_fold(&mats, operand, dims, id, matmul);
                    let got = mats.reduce_in_dim_with(operand, dims, id, matmul).unwrap();
                    assert_eq!(got, want, "{rows}x{cols} -> {operand:?}");
                    let t = mats.t().to_owned();
                    let got = t.t().reduce_in_dim_with(operand, dims, id, matmul).unwrap();
                    assert_eq!(got, want, "transposed {rows}x{cols} -> {operand:?}");
                }
                // Reversed rows: index order, not memory order.
                let rev = words.slice(ndarray::s![..;-1, ..]);
                let cat = |a: String, b: String| a + &b;
                let want = ordered_fold(&rev.to_owned().into_dyn(), &[], &[], String::new(), cat);
                let got = rev.reduce_in_dim_with(&[], &[], String::new(), cat);
                assert_eq!(got.unwrap(), want);
            });
        }
    }
}

/// Shapes as ndarray's constructors take them: another array's `raw_dim()` (fixed or dynamic
/// rank), a bare size, a tuple; the result's dimension type follows.
#[test]
fn shapes_as_ndarray_takes_them() {
    use ndarray::{Array1, Array2, ArrayD, IxDyn};
    let z = Array2::from_shape_fn((4, 5), |(i, j)| (i * 5 + j) as f64);
    let b = Array1::from_shape_fn(5, |j| j as f64);
    let (gl, gb) = unbroadcast_grads(z.raw_dim(), b.raw_dim(), &[1], &z).unwrap();
    let (gl, gb): (Array2<f64>, Array1<f64>) = (gl.into_owned(), gb.into_owned());
    assert_eq!(gl, z);
    assert_eq!(gb, array![30.0, 34.0, 38.0, 42.0, 46.0]);
    let cols: Array1<f64> = z.reduce_in_dim(5, &[1]).unwrap();
    assert_eq!(cols, gb);
    let same: Array2<f64> = z.reduce_in_dim((4, 5), &[0, 1]).unwrap();
    assert_eq!(same, z);
    let dynamic = z.clone().into_dyn();
    let d: ArrayD<f64> = dynamic.reduce_in_dim(dynamic.raw_dim(), &[0, 1]).unwrap();
    assert_eq!(d, dynamic);
    let v: ArrayD<f64> = z.reduce_in_dim(IxDyn(&[5]), &[1]).unwrap();
    assert_eq!(v, gb.clone().into_dyn());
    let v: ArrayD<f64> = z.reduce_in_dim(vec![5], &[1]).unwrap();
    assert_eq!(v, gb.into_dyn());
}

/// The adjoint's errors say that its dims are the ones kept and suggest the dims that fit.
#[test]
fn adjoint_errors_say_what_the_dims_mean() {
    let z = ndarray::Array2::<f32>::ones((4, 5));
    let err = z.reduce_in_dim(5, &[0]).unwrap_err();
    assert!(
        matches!(err, BroadcastError::ReduceInDims { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "reduce_in_dim: [4, 5] summed to [5] with broadcast_dimensions [0]: result dim 0 has \
         size 5 but array dim 0 has size 4; it must be 1 or equal; broadcast_dimensions name \
         the array dims the result keeps (result dim i is array dim dims[i], the others are \
         summed away), not the axes summed; [1] fits these shapes"
    );
    let err = z.reduce_in_dim((4, 5), &[0]).unwrap_err().to_string();
    assert!(
        err.contains("broadcast_dimensions has 1 entries but the result has rank 2")
            && err.contains("[0, 1] fits these shapes"),
        "{err}"
    );
    let err = z.reduce_in_dim(3, &[1]).unwrap_err().to_string();
    assert!(
        err.ends_with("no strictly increasing dims fit these shapes"),
        "{err}"
    );
    let err = ndarray::Array2::<f32>::ones((5, 5))
        .reduce_in_dim(1, &[2])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("out of range") && err.ends_with("[0] or [1] fit these shapes"),
        "{err}"
    );
    // The program's adjoint says the same.
    let mut p = xla_bcast::stablehlo::Program::new("adjoint");
    let x = p.parameter::<f32>(&[4, 5]);
    let perr = p.reduce_in_dim(x, &[5], &[0]).unwrap_err().to_string();
    assert_eq!(perr, z.reduce_in_dim(5, &[0]).unwrap_err().to_string());
}

/// `argmin_in_dims` / `argmax_in_dims` by the definition: for each kept index, the first
/// position (row-major over the other dims) of the extreme, NaN counting as the extreme.
fn naive_arg(x: &ArrayD<f32>, kept: &[usize], max: bool) -> ArrayD<usize> {
    let out_shape: Vec<usize> = kept.iter().map(|&d| x.shape()[d]).collect();
    let other: Vec<usize> = (0..x.ndim()).filter(|d| !kept.contains(d)).collect();
    let mut best: ArrayD<Option<(f32, usize)>> = ArrayD::from_elem(IxDyn(&out_shape), None);
    let mut pos: ArrayD<usize> = ArrayD::zeros(IxDyn(&out_shape));
    for (idx, &v) in x.indexed_iter() {
        let at: Vec<usize> = kept.iter().map(|&d| idx[d]).collect();
        let flat = other.iter().fold(0, |f, &d| f * x.shape()[d] + idx[d]);
        let seen = &mut pos[at.as_slice()];
        *seen += 1;
        let b = &mut best[at.as_slice()];
        let better = match *b {
            None => true,
            Some((w, _)) if w.is_nan() => false,
            Some(_) if v.is_nan() => true,
            Some((w, _)) => (max && v > w) || (!max && v < w),
        };
        if better {
            *b = Some((v, flat));
        }
    }
    best.mapv(|b| b.map_or(0, |(_, i)| i))
}

/// Every kept-dims choice of rank-3 arrays in several layouts (standard, transposed, reversed
/// and sliced), with ties, signed zeros and NaNs: the definition's indices, on one thread and
/// on two alike.
#[test]
fn argmin_and_argmax_are_the_first_extreme() {
    let mut seed = 11u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let values = [
        1.0,
        -1.0,
        0.0,
        -0.0,
        2.5,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0,
    ];
    let kepts: [&[usize]; 8] = [&[], &[0], &[1], &[2], &[0, 1], &[2, 0], &[1, 2], &[0, 1, 2]];
    for round in 0..24 {
        let shape = [1 + next() % 5, 1 + next() % 6, 1 + next() % 40];
        let nan_free = round % 3 == 0;
        let base = ArrayD::from_shape_fn(IxDyn(&shape), |_| {
            let v = values[next() % values.len()];
            if nan_free && v.is_nan() {
                3.0
            } else {
                v
            }
        });
        let views = [
            base.view(),
            base.view().reversed_axes(),
            base.slice_each_axis(|ax| {
                ndarray::Slice::new(0, None, if ax.axis.index() == 2 { -1 } else { 1 })
            }),
        ];
        for x in views {
            let owned = x.to_owned();
            for kept in kepts {
                for max in [false, true] {
                    let want = naive_arg(&owned, kept, max);
                    let run = || match max {
                        true => x.argmax_in_dims(kept).unwrap(),
                        false => x.argmin_in_dims(kept).unwrap(),
                    };
                    assert_eq!(run(), want, "{kept:?} max={max} over {owned:?}");
                    let two = with_parallelism(Parallelism::Threads(2), run);
                    assert_eq!(two, want);
                }
            }
        }
    }
    // A large one splits over threads, by rows and by columns.
    let x = ndarray::Array2::from_shape_fn((3000, 257), |(i, j)| ((i * 31 + j * 17) % 1009) as f32);
    for kept in [[0], [1]] {
        let want = naive_arg(&x.clone().into_dyn(), &kept, false);
        let serial = with_parallelism(Parallelism::Serial, || x.argmin_in_dims(kept).unwrap());
        let two = with_parallelism(Parallelism::Threads(2), || x.argmin_in_dims(kept).unwrap());
        assert_eq!(
            (serial.clone().into_dyn(), two.into_dyn()),
            (want.clone(), want)
        );
    }
}

#[test]
fn argmin_errors_name_the_dims() {
    let x = array![[1, 2], [3, 4]];
    let msg = |e: BroadcastError| e.to_string();
    assert_eq!(
        msg(x.argmin_in_dims([2]).unwrap_err()),
        "argmin: operand [2, 2] to shape [2, 2] with broadcast_dimensions [2]: kept dim 2 is out of range for rank 2"
    );
    assert!(msg(x.argmax_in_dims([1, 1]).unwrap_err()).ends_with("kept dim 1 repeats"));
    let empty = Array::<f32, _>::zeros((3, 0));
    assert!(msg(empty.argmin_in_dims([0]).unwrap_err())
        .ends_with("the dims [1] it reduces hold no element, which have no index"));
    // Nothing to index: an empty result, no error.
    assert_eq!(empty.argmin_in_dims([1]).unwrap().len(), 0);
}

/// An operand of the result's shape gets the gradient itself, borrowed: no copy, in all three
/// rules.
#[test]
fn unbroadcast_grads_borrow_a_gradient_that_fits() {
    let grad = ArrayD::from_shape_fn(IxDyn(&[2, 3]), |i| (i[0] * 3 + i[1]) as f32);
    let (gl, gr) = reduce::unbroadcast_grads(&[2, 3], &[3], &[1], &grad).unwrap();
    assert!(gl.is_view() && gl.as_ptr() == grad.as_ptr());
    assert!(!gr.is_view());
    let (ga, gb) = numpy::unbroadcast_grads(&[3], &[2, 3], &grad).unwrap();
    assert!(!ga.is_view() && gb.is_view() && gb.as_ptr() == grad.as_ptr());
    let (gx, gy) = paddle::unbroadcast_grads(&[2, 3], &[2], 0, &grad).unwrap();
    assert!(gx.is_view() && !gy.is_view());
    assert_eq!(gy, array![3.0, 12.0].into_dyn());
}

/// `reduce_in_dim_with` with XLA's max keeps a NaN, as `max_bcast` and the programs do; std's
/// `f32::max` drops it (the docs say to use `xla_max`).
#[test]
fn xla_max_fold_keeps_nan() {
    let x = array![[1.0f32, f32::NAN, 3.0]];
    let xla = x
        .reduce_in_dim_with([1], &[0], f32::xla_lowest(), f32::xla_max)
        .unwrap();
    assert!(xla[0].is_nan());
    let bcast = x.max_bcast(&array![0.0f32], &[0]).unwrap();
    assert!(bcast[[0, 1]].is_nan());
    let std_max = x
        .reduce_in_dim_with([1], &[0], f32::NEG_INFINITY, f32::max)
        .unwrap();
    assert_eq!(std_max[0], 3.0);
}
