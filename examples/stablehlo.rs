//! A small model recorded once, run here on the crate's ops, and printed as StableHLO that
//! XLA runs unchanged on any device.
//!
//! `cargo run --example stablehlo`

use ndarray::array;
use xla_bcast::stablehlo::{Program, Tensor};
use xla_bcast::BroadcastError;

fn main() -> Result<(), BroadcastError> {
    // relu(x + bias), and its column sums: bias along dim 1, a reduction back to (features,).
    let mut p = Program::new("bias_relu_sum");
    let x = p.parameter::<f32>(&[2, 3]);
    let bias = p.parameter::<f32>(&[3]);
    let zero = p.constant(0.0f32);
    let h = p.add(x, bias, &[1])?;
    let y = p.max(h, zero, &[])?;
    let s = p.reduce_in_dim(y, &[3], &[1])?;
    p.output(y)?;
    p.output(s)?;

    let inputs: Vec<Tensor> = vec![
        array![[1.0f32, -2.0, 3.0], [-4.0, 5.0, -6.0]]
            .into_dyn()
            .into(),
        array![0.5f32, 1.0, -1.0].into_dyn().into(),
    ];
    let outputs = p.run(&inputs)?;
    let show = |t: &Tensor| match t {
        Tensor::F32(a) => format!("{a}"),
        other => format!("{other:?}"),
    };
    println!("Run here:\n{}\n{}\n", show(&outputs[0]), show(&outputs[1]));
    let text = p.to_stablehlo();
    println!("As StableHLO:\n{text}");
    println!(
        "On XLA (any device), with jax==0.10.2:\n\
         \n    import jax, numpy as np\
         \n    from jax._src import compiler\
         \n    from jax.extend.backend import get_backend\
         \n    backend = get_backend(\"cpu\")  # or \"gpu\", \"tpu\"\
         \n    exe = backend.compile_and_load(text, backend.devices()[:1],\
         \n                                   compiler.get_compile_options(num_replicas=1, num_partitions=1))\
         \n    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32); b = np.array([0.5, 1, -1], np.float32)\
         \n    y, s = exe.execute([jax.device_put(v, backend.devices()[0]) for v in (x, b)])\n"
    );
    Ok(())
}
