//! Bad input comes back as a `BroadcastError`, never a panic or an abort: every public function
//! is called on hostile inputs inside `catch_unwind`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ndarray::{arr0, Array1, Array2, ArrayD, IxDyn};
use xla_bcast::index::{bump_indices, linear_index, multi_index, normalize_dim};
use xla_bcast::layout::{self, Layout, PaddingValue, Shape};
use xla_bcast::prelude::*;
use xla_bcast::{numpy, paddle, reduce, shape};

/// Runs `f`, which must return an error without panicking.
fn refuses<T: std::fmt::Debug>(what: &str, f: impl FnOnce() -> Result<T, BroadcastError>) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Err(e)) => assert!(!e.to_string().is_empty(), "{what}"),
        Ok(Ok(v)) => panic!("{what}: expected an error, got {v:?}"),
        Err(_) => panic!("{what}: panicked"),
    }
}

const HUGE: usize = usize::MAX / 2;

#[test]
fn shape_rules() {
    refuses("overflow", || {
        shape::binary_op_shape(&[HUGE, 1], &[1, 4], &[])
    });
    refuses("isize overflow", || {
        shape::binary_op_shape(&[isize::MAX as usize + 1], &[1], &[])
    });
    refuses("duplicate dims", || {
        shape::binary_op_shape(&[2, 3, 4], &[3, 3], &[1, 1])
    });
    refuses("unsorted dims", || {
        shape::binary_op_shape(&[2, 3, 4], &[4, 3], &[2, 1])
    });
    refuses("out of range", || {
        shape::binary_op_shape(&[2, 3], &[3], &[7])
    });
    refuses("usize::MAX dim", || {
        shape::binary_op_shape(&[2, 3], &[3], &[usize::MAX])
    });
    refuses("too many dims", || {
        shape::binary_op_shape(&[2, 3], &[3], &[0, 1])
    });
    refuses("scalar with dims", || {
        shape::binary_op_shape(&[2, 3], &[], &[0])
    });
    refuses("equal ranks permuted", || {
        shape::binary_op_shape(&[2, 3], &[3, 2], &[1, 0])
    });
    refuses("degenerate ranks", || {
        shape::degenerate_shape(&[2], &[2, 2])
    });
    refuses("in_dim overflow", || {
        shape::broadcast_in_dim_shape(&[1, 1], &[HUGE, HUGE], &[0, 1])
    });
    refuses("in_dim dup", || {
        shape::broadcast_in_dim_shape(&[1, 1], &[2, 2], &[0, 0])
    });
    refuses("in_dim rank", || {
        shape::broadcast_in_dim_shape(&[1, 1, 1], &[2, 2], &[0, 1, 2])
    });
    refuses("numpy overflow", || {
        shape::numpy_shape(&[&[HUGE, 1], &[1, HUGE]])
    });
    refuses("numpy mismatch", || shape::numpy_shape(&[&[3], &[4]]));
    refuses("paddle axis", || {
        shape::paddle_shape(&[2, 3], &[3], isize::MIN)
    });
    refuses("paddle axis max", || {
        shape::paddle_shape(&[2, 3], &[3], isize::MAX)
    });
    refuses("paddle overflow", || {
        shape::paddle_shape(&[HUGE, 1], &[1, HUGE], 0)
    });
    refuses("select", || shape::select_shape(&[2], &[3], &[2]));
    refuses("checked_size", || shape::checked_size(&[HUGE, 4]));
}

#[test]
fn views_and_ops() {
    let a = Array2::<f32>::ones((2, 3));
    let v = Array1::<f32>::ones(3);
    refuses("view overflow", || {
        a.broadcast_in_dim(&[HUGE, 2, 3], &[1, 2]).map(|v| v.len())
    });
    refuses("view huge dims", || {
        a.broadcast_in_dim(&[2, 3], &[usize::MAX, 0])
            .map(|v| v.len())
    });
    refuses("leading overflow", || {
        a.broadcast_leading(&[HUGE, HUGE]).map(|v| v.len())
    });
    refuses("rank promotion", || a.add_bcast(&v, &[]));
    refuses("pow", || a.pow_bcast(&v, &[0]));
    refuses("zip", || a.zip_bcast(&v, &[0, 1], |x, y| x * y));
    refuses("compare", || a.ge_bcast(&v, &[5]));
    let mut wrong = Array2::<f32>::zeros((3, 2));
    refuses("into wrong shape", || {
        a.add_bcast_into(&v, &[1], &mut wrong)
    });
    assert!(wrong.iter().all(|&x| x == 0.0));
    let mut bools = Array2::from_elem((1, 1), false);
    refuses("compare into", || a.eq_bcast_into(&v, &[1], &mut bools));
    let mut small = Array1::<f32>::zeros(3);
    refuses("assign grows", || small.add_assign_bcast(&a, &[1]));
    refuses("select", || Array1::from_elem(2, true).select_bcast(&a, &a));
    let bits = Array2::<u8>::ones((2, 3));
    refuses("shift dims", || {
        bits.shift_left_bcast(&Array1::<u8>::ones(3), &[0])
    });
    refuses("xor rank", || bits.xor_bcast(&Array1::<u8>::ones(3), &[]));
    refuses("atan2", || a.atan2_bcast(&v, &[7]));
    refuses("clamp row", || {
        a.clamp_bcast(&Array2::zeros((1, 3)), &arr0(1.0))
    });
    refuses("clamp rank", || a.clamp_bcast(&arr0(0.0), &v));
    let mut c = a.clone();
    refuses("clamp in place", || c.clamp_assign_bcast(&v, &v));
    assert_eq!(c, a);
    let mut out = Array2::<f32>::zeros((3, 2));
    refuses("clamp into", || {
        a.clamp_bcast_into(&arr0(0.0), &arr0(1.0), &mut out)
    });
    refuses("numpy clamp", || {
        numpy::clamp(&a, &Array1::<f32>::ones(2), &arr0(1.0))
    });
    // A result too large to allocate, from zero-copy inputs: an error, not an abort.
    // (2^31 x 2^31 on 64-bit targets, 2^15 x 2^15 on 32-bit ones: too many bytes either way.)
    let big = 1usize << (usize::BITS / 2 - 1);
    let s = arr0(1.0f32);
    let col = s.broadcast_in_dim(&[big, 1], &[]).unwrap();
    let row = s.broadcast_in_dim(&[1, big], &[]).unwrap();
    refuses("allocation", || col.add_bcast(&row, &[]).map(|r| r.len()));
    refuses("numpy allocation", || {
        numpy::mul(&col, &row).map(|r| r.len())
    });
    // An output whose element count overflows: named as such, on the equal-rank fast path too.
    let huge = 1usize << (usize::BITS / 2);
    let col = s.broadcast_in_dim(&[huge, 1], &[]).unwrap();
    let row = s.broadcast_in_dim(&[1, huge], &[]).unwrap();
    let e = col.add_bcast(&row, &[]).unwrap_err();
    assert!(matches!(e, BroadcastError::SizeOverflow { .. }), "{e:?}");
}

#[test]
fn rank_32() {
    let shape = [1usize; 32];
    let a = ArrayD::<i64>::ones(IxDyn(&shape));
    let mut other = shape;
    other[31] = 3;
    let b = ArrayD::<i64>::ones(IxDyn(&other));
    let r = a.add_bcast(&b, &[]).unwrap();
    assert_eq!(r.shape(), &other);
    assert_eq!(r.sum(), 6);
    let mut bad = other;
    bad[31] = 4;
    refuses("rank 32 mismatch", || {
        b.add_bcast(&ArrayD::<i64>::ones(IxDyn(&bad)), &[])
    });
    refuses("rank 32 to 2", || {
        b.add_bcast(&Array1::<i64>::ones(4), &[31])
    });
    let v = a
        .broadcast_in_dim(&other, &(0..32).collect::<Vec<_>>())
        .unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(
        r.reduce_in_dim(&shape, &(0..32).collect::<Vec<_>>())
            .unwrap()
            .sum(),
        6
    );
}

#[test]
fn wrappers_and_adjoint() {
    let a = Array2::<f64>::ones((2, 3));
    refuses("numpy", || numpy::add(&a, &Array1::<f64>::ones(2)));
    refuses("broadcast_to", || {
        numpy::broadcast_to(&a, &[3]).map(|v| v.len())
    });
    refuses("broadcast_to shrink", || {
        numpy::broadcast_to(&a, &[2, 1]).map(|v| v.len())
    });
    refuses("broadcast_arrays", || {
        numpy::broadcast_arrays(&[&a, &Array2::<f64>::ones((3, 2))]).map(|v| v.len())
    });
    refuses("paddle", || {
        paddle::elementwise_add(&a, &Array1::<f64>::ones(2), -1)
    });
    refuses("paddle generic", || {
        paddle::elementwise(&a, &a, 7, |x: f64, y: f64| x + y)
            .map(|_| ())
            .and(Err::<(), _>(BroadcastError::ParseShape {
                text: String::new(),
                reason: String::new(),
            }))
    });
    refuses("reduce shape", || a.reduce_in_dim(&[4], &[1]));
    refuses("reduce dims", || a.reduce_in_dim(&[3], &[5]));
    refuses("reduce huge", || a.reduce_in_dim(&[HUGE], &[1]));
    let mut wrong = Array1::<f64>::zeros(5);
    refuses("reduce into", || a.reduce_in_dim_into(&[1], &mut wrong));
    let ones = Array1::<f64>::ones(3);
    refuses("grads", || {
        reduce::unbroadcast_grads(&[2, 3], &[3], &[1], &ones)
    });
    refuses("numpy grads", || {
        numpy::unbroadcast_grads(&[2, 3], &[4], &a)
    });
    refuses("sum_to_shape", || numpy::sum_to_shape(&a, &[2, 2, 3]));
    refuses("paddle grads", || {
        paddle::unbroadcast_grads(&[2, 3], &[2], 5, &a)
    });
}

#[test]
fn layouts_buffers_and_indices() {
    let l = Layout::row_major(2);
    refuses("not a permutation", || Layout::new(vec![0, 0]));
    refuses("out of range", || Layout::new(vec![5]));
    refuses("rank mismatch", || l.strides(&[1, 2, 3]));
    refuses("padded smaller", || {
        l.clone()
            .with_padding(vec![1, 1], PaddingValue::Zero)
            .strides(&[2, 2])
    });
    refuses("padded length", || {
        l.clone()
            .with_padding(vec![1], PaddingValue::Zero)
            .buffer_len(&[1, 1])
    });
    refuses("padded overflow", || {
        l.clone()
            .with_padding(vec![HUGE, HUGE], PaddingValue::Zero)
            .buffer_len(&[1, 1])
    });
    refuses("empty buffer", || {
        layout::view::<u8>(&[], &[2, 2], &l).map(|v| v.len())
    });
    refuses("short buffer", || {
        layout::view_mut(&mut [0u8; 3], &[2, 2], &l).map(|v| v.len())
    });
    refuses("overflow dims", || {
        layout::view(&[0u8; 4], &[HUGE, 4], &l).map(|v| v.len())
    });
    refuses("from_buffer", || {
        layout::from_buffer(&[0u8; 3], &[2, 2], &l)
    });
    refuses("to_buffer rank", || {
        layout::to_buffer(&Array1::<f32>::ones(3), &l)
    });
    // A padded layout too large to allocate for a small array.
    let padded = l
        .clone()
        .with_padding(vec![1 << 31, 1 << 31], PaddingValue::Zero);
    refuses("to_buffer allocation", || {
        layout::to_buffer(&Array2::<f32>::ones((1, 1)), &padded)
    });
    refuses("linear", || linear_index(&[2, 2], &l, &[2, 0]));
    refuses("linear rank", || linear_index(&[2, 2], &l, &[0, 0, 0]));
    refuses("multi", || multi_index(&[2, 2], &l, usize::MAX));
    refuses("multi padding", || {
        multi_index(
            &[1, 1],
            &l.clone().with_padding(vec![2, 2], PaddingValue::One),
            1,
        )
    });
    refuses("dimension_stride", || {
        l.dimension_stride(&[2, 2], usize::MAX)
    });
    refuses("normalize", || normalize_dim(isize::MIN, 5));
    assert_eq!(
        normalize_dim(isize::MIN, usize::MAX).unwrap(),
        usize::MAX - isize::MIN.unsigned_abs()
    );
    refuses("normalize", || normalize_dim(0, 0));
    refuses("parse", || "f32[18446744073709551616]".parse::<Shape>());
    refuses("parse", || "".parse::<Shape>());
    assert!(!catch_unwind(|| bump_indices(&[2, 2], &mut [9, 9, 9])).unwrap());
}

/// Asserts that `f` returns [`BroadcastError::Allocation`]. Run in this process on purpose: an
/// allocation that aborted instead (as `handle_alloc_error` does) would kill the whole test
/// binary, which fails the run.
fn unallocatable<T: std::fmt::Debug>(what: &str, f: impl FnOnce() -> Result<T, BroadcastError>) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Err(BroadcastError::Allocation { .. })) => {}
        other => panic!("{what}: expected an allocation error, got {other:?}"),
    }
}

/// Every public entry point that allocates on the user's behalf, asked for a result whose bytes
/// exceed `isize::MAX` (a zero-copy view of one element as input): an error, never an abort.
#[test]
fn unallocatable_results_are_errors() {
    // 2^(bits-3) f32 elements: 2^(bits-1) bytes, more than any allocation may have.
    let n = 1usize << (usize::BITS - 3);
    let s = arr0(1.0f32);
    let big = s.broadcast_in_dim(&[n], &[]).unwrap();
    let col = s.broadcast_in_dim(&[n, 1], &[]).unwrap();
    let one = Array1::from_elem(1, 2.0f32);
    unallocatable("add", || big.add_bcast(&one, &[]).map(|r| r.len()));
    unallocatable("pow", || big.pow_bcast(&s, &[]).map(|r| r.len()));
    unallocatable("zip", || {
        big.zip_bcast(&s, &[], |a, b| a * b).map(|r| r.len())
    });
    // A `bool` result has a byte an element: 2^29 of them fit a 32-bit address space.
    #[cfg(target_pointer_width = "64")]
    unallocatable("compare", || big.lt_bcast(&s, &[]).map(|r| r.len()));
    unallocatable("atan2", || big.atan2_bcast(&s, &[]).map(|r| r.len()));
    unallocatable("clamp", || big.clamp_bcast(&s, &s).map(|r| r.len()));
    let bits = arr0(1u64);
    let many = bits.broadcast_in_dim(&[n], &[]).unwrap();
    unallocatable("shift", || {
        many.shift_left_bcast(&bits, &[]).map(|r| r.len())
    });
    let t = arr0(true);
    unallocatable("select", || t.select_bcast(&big, &s).map(|r| r.len()));
    unallocatable("reduce_in_dim", || {
        big.reduce_in_dim(&[n], &[0]).map(|r| r.len())
    });
    unallocatable("reduce_in_dim_with", || {
        col.reduce_in_dim_with(&[n, 1], &[0, 1], 0.0, f32::max)
            .map(|r| r.len())
    });
    // (A gradient of an operand's own shape is borrowed, not allocated: the lhs sums instead.)
    let wide = s.broadcast_in_dim(&[n, 2], &[]).unwrap();
    unallocatable("unbroadcast_grads", || {
        reduce::unbroadcast_grads(&[n, 1], &[2], &[1], &wide).map(|r| r.0.len())
    });
    unallocatable("numpy add", || numpy::add(&big, &one).map(|r| r.len()));
    unallocatable("numpy zip_with", || {
        numpy::zip_with(&col, &one, |a: f32, b: f32| a - b).map(|r| r.len())
    });
    unallocatable("numpy sum_to_shape", || {
        numpy::sum_to_shape(&col, &[n, 1]).map(|r| r.len())
    });
    unallocatable("numpy unbroadcast_grads", || {
        numpy::unbroadcast_grads(&[n, 1], &[2], &wide).map(|r| r.0.len())
    });
    unallocatable("paddle add", || {
        paddle::elementwise_add(&col, &one, -1).map(|r| r.len())
    });
    unallocatable("paddle elementwise", || {
        paddle::elementwise(&col, &one, 1, |a: f32, b: f32| a + b).map(|r| r.len())
    });
    unallocatable("paddle unbroadcast_grads", || {
        paddle::unbroadcast_grads(&[n, 1], &[2], -1, &wide).map(|r| r.0.len())
    });
    unallocatable("to_buffer", || {
        layout::to_buffer(&col, &Layout::col_major(2)).map(|b| b.len())
    });
    // A panicking convenience method panics with the error's message, never aborts.
    let strict = catch_unwind(AssertUnwindSafe(|| (big.strict() + 1.0).len()));
    let msg = *strict.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("cannot allocate"), "{msg}");
}

/// The report that found the abort: 4 TiB, which the allocator refuses on this machine (it is
/// no larger than the address space, so the refusal comes from the allocator, not from a size
/// check).
#[cfg(target_pointer_width = "64")]
#[test]
fn a_reduction_the_allocator_refuses() {
    let one = arr0(1f32);
    let b = one.broadcast_in_dim(&[1 << 40], &[]).unwrap();
    unallocatable("reduce_in_dim", || {
        b.reduce_in_dim(&[1 << 40], &[0]).map(|r| r.len())
    });
}
