//! A tour of xla_bcast: the examples of XLA's *Broadcasting semantics* document, run.
//!
//! `cargo run --release --example tour`

use ndarray::{arr0, array, Array, Array2};
use xla_bcast::prelude::*;
use xla_bcast::{numpy, paddle};

fn show<T: std::fmt::Display>(title: &str, value: T) {
    println!("{title}\n{value}\n");
}

fn main() -> Result<(), BroadcastError> {
    let x = array![[1, 2, 3], [4, 5, 6]];
    let v = array![7, 8, 9];

    show(
        "|1 2 3; 4 5 6| + |7 8 9| with broadcast_dimensions [1]:",
        x.add_bcast(&v, &[1])?,
    );
    show(
        "The same without broadcast_dimensions is refused:",
        x.add_bcast(&v, &[]).unwrap_err(),
    );
    show("Scalar: |1 2 3; 4 5 6| + 7:", x.add_bcast(&arr0(7), &[])?);

    let z = Array2::<i32>::zeros((3, 3));
    show(
        "3x3 + |7 8 9| with [1] (each row is the vector):",
        z.add_bcast(&v, &[1])?,
    );
    show(
        "3x3 + |7 8 9| with [0] (each column is the vector):",
        z.add_bcast(&v, &[0])?,
    );
    show(
        "2x3 + |7 8 9| with [0] is illegal:",
        x.add_bcast(&v, &[0]).unwrap_err(),
    );

    let cuboid = Array::from_shape_fn((2, 3, 4), |(i, _, _)| 100 * i as i32);
    let m = Array::from_shape_fn((3, 4), |(j, k)| (10 * j + k) as i32);
    show("2x3x4 + 3x4 with [1, 2]:", cuboid.add_bcast(&m, &[1, 2])?);

    let tv = Array2::<i32>::zeros((4, 3));
    show(
        "MxNxPxQ + TxV matching V to N and T to P ([2, 1]) is illegal:",
        Array::<i32, _>::zeros((2, 3, 4, 5))
            .add_bcast(&tv, &[2, 1])
            .unwrap_err(),
    );

    show(
        "Degenerate: (2,1) + (1,3) is an outer operation:",
        array![[1], [2]].add_bcast(&array![[10, 20, 30]], &[])?,
    );
    show(
        "(7,2,5) + (7,2,6) is incompatible:",
        Array::<i32, _>::zeros((7, 2, 5))
            .add_bcast(&Array::<i32, _>::zeros((7, 2, 6)), &[])
            .unwrap_err(),
    );
    show(
        "Composition: |1 2 3 4| + [5 6] (1x2) with [0]:",
        array![1, 2, 3, 4].add_bcast(&array![[5, 6]], &[0])?,
    );
    let r = array![[1, 2]].add_bcast(&Array::<i32, _>::zeros((4, 3, 1)), &[1, 2])?;
    println!("1x2 + 4x3x1 with [1, 2] gives shape {:?}\n", r.shape());

    let b = v.broadcast_in_dim(&[2, 3], &[1])?;
    println!(
        "broadcast_in_dim is a view: shape {:?}, strides {:?}, same buffer: {}\n",
        b.shape(),
        b.strides(),
        b.as_ptr() == v.as_ptr()
    );

    show(
        "The strict() operators: x.strict() * &[[10], [100]]",
        x.strict() * &array![[10], [100]],
    );

    let col = array![[0], [10], [20], [30]];
    show(
        "NumPy rule, numpy::add([[0],[10],[20],[30]], [1,2,3]):",
        numpy::add(&col, &array![1, 2, 3])?,
    );
    show(
        "Paddle rule, elementwise_add((2,3,4,5), (3), axis=1) shape:",
        format!(
            "{:?}",
            paddle::elementwise_add(
                &Array::<f32, _>::zeros((2, 3, 4, 5)),
                &array![1.0f32, 2.0, 3.0],
                1
            )?
            .shape()
        ),
    );
    Ok(())
}
