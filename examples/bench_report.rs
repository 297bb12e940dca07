//! The README's performance table: xla_bcast against baselines measured in the same run, on
//! the cases `../shared/peerbench` compares with NumPy, JAX, PyTorch and candle. Every case is
//! sampled in interleaved rounds (each round visits every system once, in an order rotated from
//! round to round), so a burst of load from other jobs lands on all of them alike; it prints
//! medians, the allocating tail (p90 / median) and ratios.
//!
//! Baselines: a 2-thread Rayon loop over slices into a preallocated output (the STREAM-style
//! bandwidth limit for that case's streams, measured here), a serial loop, ndarray's operators
//! (`&a + &b`, `sum_axis`) and ndarray's `Zip::par_for_each`.
//!
//! `cargo run --release --example bench_report [rounds]`

use std::hint::black_box;
use std::time::Instant;

use ndarray::{Array2, Axis, Zip};
use rayon::prelude::*;
use xla_bcast::prelude::*;
use xla_bcast::{with_parallelism, Parallelism};

/// One timed sample of `f`, in microseconds per call (calls batched to about 2 ms).
fn sample(f: &mut dyn FnMut()) -> f64 {
    let t = Instant::now();
    f();
    let one = t.elapsed().as_secs_f64();
    let batch = ((2e-3 / one.max(1e-9)) as usize).clamp(1, 10_000);
    if batch == 1 {
        return one * 1e6;
    }
    let t = Instant::now();
    for _ in 0..batch {
        f();
    }
    t.elapsed().as_secs_f64() * 1e6 / batch as f64
}

/// A named system of a case: a call to time.
type System<'a> = (&'static str, Box<dyn FnMut() + 'a>);

/// A system's samples: their median and 90th percentile.
struct Stats {
    median: f64,
    p90: f64,
}

/// Samples every system of a case in `rounds` interleaved rounds.
fn measure(rounds: usize, systems: &mut [System<'_>]) -> Vec<Stats> {
    let n = systems.len();
    let mut samples = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        for i in 0..n {
            let k = match round % 2 {
                0 => (i + round) % n,
                _ => n - 1 - (i + round) % n,
            };
            samples[k].push(sample(&mut systems[k].1));
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            Stats {
                median: s[s.len() / 2],
                p90: s[(s.len() * 9 / 10).min(s.len() - 1)],
            }
        })
        .collect()
}

/// Prints a case: xla_bcast's systems first (named `xla_bcast...`), then every other system as
/// a baseline with the ratio of the first xla_bcast system's median to its median.
fn report(case: &str, rounds: usize, mut systems: Vec<System<'_>>) {
    let stats = measure(rounds, &mut systems);
    let ours = stats[0].median;
    for ((name, _), s) in systems.iter().zip(&stats) {
        let ratio = if name.starts_with("xla_bcast") {
            String::new()
        } else {
            format!("{:.2}", ours / s.median)
        };
        println!(
            "| {case} | {name} | {} | {:.2} | {ratio} |",
            fmt_us(s.median),
            s.p90 / s.median
        );
    }
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.2} us")
    }
}

/// `out = a + b` over slices on Rayon's threads: the bandwidth limit of a 3-stream add.
fn stream_add(a: &[f32], b: &[f32], out: &mut [f32]) {
    let chunk = a.len().div_ceil(rayon::current_num_threads()).max(1);
    out.par_chunks_mut(chunk)
        .zip(a.par_chunks(chunk))
        .zip(b.par_chunks(chunk))
        .for_each(|((o, a), b)| {
            for ((o, x), y) in o.iter_mut().zip(a).zip(b) {
                *o = x + y;
            }
        });
}

/// `out[i] = a[i] + b[i]` elementwise, serially.
fn serial_add(a: &[f32], b: &[f32], out: &mut [f32]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

fn matrix(m: usize, n: usize, salt: usize) -> Array2<f32> {
    Array2::from_shape_fn((m, n), |(i, j)| ((i * 7 + j * 3 + salt) % 97) as f32 / 8.0)
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(11);
    let n = 4096;
    let (a, b) = (matrix(n, n, 0), matrix(n, n, 1));
    let (row, col) = (matrix(1, n, 2), matrix(n, 1, 3));
    let mut out = Array2::<f32>::zeros((n, n));
    let out = &mut out;
    let slice = |x: &Array2<f32>| x.as_slice().expect("standard layout").to_vec();
    let (sa, sb) = (slice(&a), slice(&b));
    println!(
        "{} threads; medians of {rounds} interleaved rounds; p90/med: the tail of the samples; \
         ratio: xla_bcast's time over the baseline's (< 1: xla_bcast is faster)\n",
        rayon::current_num_threads()
    );
    println!("| case | system | median | p90/med | ratio |");
    println!("|---|---|---|---|---|");

    let (mut buf, mut buf2, mut buf3) = (vec![0f32; n * n], vec![0f32; n * n], vec![0f32; n * n]);
    report(
        "4096² f32 a + b",
        rounds,
        vec![
            (
                "xla_bcast `add_bcast`",
                Box::new(|| drop(black_box(a.add_bcast(&b, &[]).unwrap()))),
            ),
            ("ndarray `&a + &b`", Box::new(|| drop(black_box(&a + &b)))),
            (
                "ndarray `Zip::par_for_each`",
                Box::new(|| {
                    let mut o = Array2::<f32>::uninit((n, n));
                    Zip::from(&mut o).and(&a).and(&b).par_for_each(|o, &x, &y| {
                        o.write(x + y);
                    });
                    // SAFETY: every element was written above.
                    drop(black_box(unsafe { o.assume_init() }))
                }),
            ),
            (
                "STREAM add, fresh output",
                Box::new(|| {
                    let mut o = vec![0f32; n * n];
                    stream_add(&sa, &sb, &mut o);
                    drop(black_box(o))
                }),
            ),
        ],
    );
    report(
        "4096² f32 a + b, into",
        rounds,
        vec![
            (
                "xla_bcast `add_bcast_into`",
                Box::new(|| a.add_bcast_into(&b, &[], &mut *out).unwrap()),
            ),
            (
                "STREAM add, into",
                Box::new(|| stream_add(&sa, &sb, &mut buf)),
            ),
            (
                "serial loop, into",
                Box::new(|| serial_add(&sa, &sb, &mut buf2)),
            ),
        ],
    );
    for (case, rhs) in [("4096² f32 + (1,N)", &row), ("4096² f32 + (M,1)", &col)] {
        report(
            case,
            rounds,
            vec![
                (
                    "xla_bcast `add_bcast`",
                    Box::new(|| drop(black_box(a.add_bcast(rhs, &[]).unwrap()))),
                ),
                (
                    "xla_bcast `add_bcast_into`",
                    Box::new(|| a.add_bcast_into(rhs, &[], &mut *out).unwrap()),
                ),
                ("ndarray `&a + &b`", Box::new(|| drop(black_box(&a + rhs)))),
            ],
        );
    }
    let mut acc = a.clone();
    let mut nd_acc = a.clone();
    report(
        "4096² f32 += (1,N)",
        rounds,
        vec![
            (
                "xla_bcast `add_assign_bcast`",
                Box::new(|| acc.add_assign_bcast(&row, &[]).unwrap()),
            ),
            ("ndarray `a += &b`", Box::new(|| nd_acc += &row)),
        ],
    );
    report(
        "4096² f32 (M,1) + (1,N)",
        rounds,
        vec![
            (
                "xla_bcast `add_bcast`",
                Box::new(|| drop(black_box(col.add_bcast(&row, &[]).unwrap()))),
            ),
            (
                "ndarray `&a + &b`",
                Box::new(|| drop(black_box(&col + &row))),
            ),
        ],
    );
    // A transposed view of a standard-layout array: its rows are the columns of `a`'s memory.
    // (`x.t().to_owned()` would not do: ndarray keeps the copy's memory order, so its `.t()`
    // is standard layout again.)
    let at = a.t();
    report(
        "4096² f32 a.T + b",
        rounds,
        vec![
            (
                "xla_bcast `add_bcast`",
                Box::new(|| drop(black_box(at.add_bcast(&b, &[]).unwrap()))),
            ),
            (
                "xla_bcast `add_bcast_into`",
                Box::new(|| at.add_bcast_into(&b, &[], &mut *out).unwrap()),
            ),
            ("ndarray `&a + &b`", Box::new(|| drop(black_box(&at + &b)))),
            (
                "STREAM add, into",
                Box::new(|| stream_add(&sa, &sb, &mut buf3)),
            ),
        ],
    );
    let (m, m_b) = (matrix(512, 512, 4), matrix(512, 512, 5));
    let mut m_out = Array2::<f32>::zeros((512, 512));
    let (ma, mb) = (slice(&m), slice(&m_b));
    let mut m_buf = vec![0f32; 512 * 512];
    report(
        "512² f32 a + b",
        rounds,
        vec![
            (
                "xla_bcast `add_bcast`",
                Box::new(|| drop(black_box(m.add_bcast(&m_b, &[]).unwrap()))),
            ),
            (
                "xla_bcast `add_bcast`, serial",
                Box::new(|| {
                    let r = with_parallelism(Parallelism::Serial, || m.add_bcast(&m_b, &[]));
                    drop(black_box(r.unwrap()))
                }),
            ),
            (
                "xla_bcast `add_bcast_into`",
                Box::new(|| m.add_bcast_into(&m_b, &[], &mut m_out).unwrap()),
            ),
            ("ndarray `&a + &b`", Box::new(|| drop(black_box(&m + &m_b)))),
            // No 2-thread STREAM row here: Rayon's `par_iter` from outside the pool parks the
            // caller until the pool is done, which costs more than a 1 MiB add.
            (
                "serial loop, into",
                Box::new(|| serial_add(&ma, &mb, &mut m_buf)),
            ),
        ],
    );
    let (s, s_b) = (matrix(64, 64, 6), matrix(64, 64, 7));
    report(
        "64² f32 a + b",
        rounds,
        vec![
            (
                "xla_bcast `add_bcast`",
                Box::new(|| drop(black_box(s.add_bcast(&s_b, &[]).unwrap()))),
            ),
            ("ndarray `&a + &b`", Box::new(|| drop(black_box(&s + &s_b)))),
        ],
    );
    let mut sums = Array2::<f32>::zeros((n, 1));
    report(
        "sum 4096² f32 -> (M,1)",
        rounds,
        vec![
            (
                "xla_bcast `reduce_in_dim`",
                Box::new(|| drop(black_box(a.reduce_in_dim(&[n, 1], &[0, 1]).unwrap()))),
            ),
            (
                "xla_bcast `reduce_in_dim_into`",
                Box::new(|| a.reduce_in_dim_into(&[0, 1], &mut sums).unwrap()),
            ),
            (
                "ndarray `sum_axis`",
                Box::new(|| drop(black_box(a.sum_axis(Axis(1))))),
            ),
        ],
    );
    let mut col_sums = Array2::<f32>::zeros((1, n));
    report(
        "sum 4096² f32 -> (1,N)",
        rounds,
        vec![
            (
                "xla_bcast `reduce_in_dim`",
                Box::new(|| drop(black_box(a.reduce_in_dim(&[1, n], &[0, 1]).unwrap()))),
            ),
            (
                "xla_bcast `reduce_in_dim_into`",
                Box::new(|| a.reduce_in_dim_into(&[0, 1], &mut col_sums).unwrap()),
            ),
            (
                "ndarray `sum_axis`",
                Box::new(|| drop(black_box(a.sum_axis(Axis(0))))),
            ),
        ],
    );
    // The eager unary ops: `exp` into a caller's array beside ndarray's `mapv` with std's
    // function, and a parallel copy (the floor: one read, one write).
    let x = a.mapv(|v| v * 0.05 - 2.0);
    let mut e = Array2::<f32>::zeros((n, n));
    let mut copy = vec![0f32; n * n];
    let sx = slice(&x);
    report(
        "4096² f32 exp, into",
        rounds,
        vec![
            (
                "xla_bcast `xla_exp_into`",
                Box::new(|| x.xla_exp_into(&mut e).unwrap()),
            ),
            (
                "ndarray `mapv(f32::exp)`",
                Box::new(|| drop(black_box(x.mapv(f32::exp)))),
            ),
            (
                "parallel copy, into",
                Box::new(|| {
                    let chunk = sx.len().div_ceil(rayon::current_num_threads()).max(1);
                    copy.par_chunks_mut(chunk)
                        .zip(sx.par_chunks(chunk))
                        .for_each(|(o, s)| o.copy_from_slice(s));
                }),
            ),
        ],
    );
    report(
        "4096² f32 tanh, into",
        rounds,
        vec![
            (
                "xla_bcast `xla_tanh_into`",
                Box::new(|| x.xla_tanh_into(&mut e).unwrap()),
            ),
            (
                "ndarray `mapv(f32::tanh)`",
                Box::new(|| drop(black_box(x.mapv(f32::tanh)))),
            ),
        ],
    );
}
