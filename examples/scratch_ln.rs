use ndarray::{Array1, Array2, Axis, Zip};
use std::hint::black_box;
use std::time::Instant;
use xla_bcast::prelude::*;
fn med(f: &mut dyn FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..15)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[7]
}
fn med_on(f: &mut dyn FnMut(Array2<f32>), x: &Array2<f32>) -> f64 {
    f(x.clone());
    let mut t: Vec<f64> = (0..21)
        .map(|_| {
            let v = x.clone();
            let s = Instant::now();
            f(v);
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[10]
}
fn main() {
    let (m, n) = (4096usize, 1024usize);
    let x = Array2::from_shape_fn((m, n), |(i, j)| ((i * n + j) % 2000) as f32 * 0.004 - 4.0);
    let g = Array1::from_shape_fn(n, |j| 1.0 + j as f32 * 0.001);
    let mu = x.mean_axis(Axis(1)).unwrap();
    let mut y = x.clone();
    println!(
        "mean_axis {:.3}",
        med(&mut || drop(black_box(x.mean_axis(Axis(1)))))
    );
    println!(
        "map_axis dot {:.3}",
        med(&mut || drop(black_box(x.map_axis(Axis(1), |r| r.dot(&r)))))
    );
    println!(
        "sub_assign rows {:.3}",
        med(&mut || y.sub_assign_bcast(&mu, &[0]).unwrap())
    );
    println!(
        "mul_assign cols {:.3}",
        med(&mut || y.mul_assign_bcast(&g, &[1]).unwrap())
    );
    println!(
        "zip in place {:.3}",
        med(&mut || Zip::from(&mut y).par_for_each(|v| *v *= 1.0001))
    );
    let mut z = x.clone();
    println!(
        "copy {:.3}",
        med(&mut || Zip::from(&mut z).and(&x).par_for_each(|o, &v| *o = v))
    );
    let b = g.mapv(|v| v * 0.5);
    println!(
        "ln1 {:.3}",
        med_on(&mut |x| drop(black_box(ln1(x, &g, &b))), &x)
    );
    println!(
        "ln2 {:.3}",
        med_on(&mut |x| drop(black_box(ln2(x, &g, &b))), &x)
    );
    println!("clone {:.3}", med(&mut || { drop(black_box(x.clone())) }));
    println!(
        "x.strict()-mu {:.3}",
        med(&mut || drop(black_box(x.strict() - mu.in_dims(&[0]))))
    );
}
#[allow(dead_code)]
fn ln1(x: Array2<f32>, g: &Array1<f32>, b: &Array1<f32>) -> Array2<f32> {
    let (m, n) = x.dim();
    let mu = x.reduce_in_dim([m], &[0]).unwrap() / n as f32;
    let xc = x.into_strict() - mu.in_dims(&[0]);
    let var = (&xc * &xc).reduce_in_dim([m], &[0]).unwrap() / n as f32;
    let rstd = var.mapv(|v| 1.0 / (v + 1e-5).sqrt());
    (xc * rstd.in_dims(&[0]) * g.in_dims(&[1]) + b.in_dims(&[1])).into_inner()
}
#[allow(dead_code)]
fn ln2(x: Array2<f32>, g: &Array1<f32>, b: &Array1<f32>) -> Array2<f32> {
    let (m, n) = x.dim();
    let mu = x.reduce_in_dim([m], &[0]).unwrap() / n as f32;
    let xc = x.into_strict() - mu.in_dims(&[0]);
    let rstd = Zip::from(xc.rows()).par_map_collect(|r| 1.0 / (r.dot(&r) / n as f32 + 1e-5).sqrt());
    (xc * rstd.in_dims(&[0]) * g.in_dims(&[1]) + b.in_dims(&[1])).into_inner()
}
