"""Reproduces the rewrites of XLA's CPU compiler that change results against StableHLO's
semantics (which `xla_bcast::stablehlo::Program::run` keeps), each with one small module. Prints,
for each, StableHLO's result and XLA's, and whether they differ. Needs `jax==0.10.2`, as
`tools/xla_check.py`.

    python tools/xla_rewrites.py
"""

import numpy as np
import jax
from jax._src import compiler
from jax.extend.backend import get_backend

jax.config.update("jax_enable_x64", True)

# (what, module, inputs, StableHLO's result)
CASES = [
    (
        "integer a / pow(b, c) becomes a * pow(b, -c): 7 / pow(3, 1)",
        """module @m {
  func.func public @main(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<i32>) -> (tensor<i32>) {
    %0 = stablehlo.power %b, %c : tensor<i32>
    %1 = stablehlo.divide %a, %0 : tensor<i32>
    return %1 : tensor<i32>
  }
}""",
        [np.int32(7), np.int32(3), np.int32(1)],
        np.int32(2),
    ),
    (
        "x / broadcast(y) becomes x * (1 / y): [3, 1e30] / 3e38",
        """module @m {
  func.func public @main(%x: tensor<2xf32>, %y: tensor<f32>) -> (tensor<2xf32>) {
    %0 = stablehlo.broadcast_in_dim %y, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %1 = stablehlo.divide %x, %0 : tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}""",
        [np.array([3.0, 1e30], np.float32), np.float32(3e38)],
        np.array([3.0, 1e30], np.float32) / np.float32(3e38),
    ),
    (
        "a sum over a size-1 dim drops its init: sum([-0.0]) from +0.0",
        """module @m {
  func.func public @main(%x: tensor<1xf32>) -> (tensor<f32>) {
    %0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%x init: %0) applies stablehlo.add across dimensions = [0] : (tensor<1xf32>, tensor<f32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}""",
        [np.array([-0.0], np.float32)],
        np.float32(0.0),
    ),
    (
        "a * b + c contracts to one fused multiply-add: (1 + 2^-12)^2 - (1 + 2^-11)",
        """module @m {
  func.func public @main(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>) -> (tensor<f32>) {
    %0 = stablehlo.multiply %a, %b : tensor<f32>
    %1 = stablehlo.add %0, %c : tensor<f32>
    return %1 : tensor<f32>
  }
}""",
        [np.float32(1 + 2**-12), np.float32(1 + 2**-12), np.float32(-(1 + 2**-11))],
        np.float32(np.float32(1 + 2**-12) * np.float32(1 + 2**-12)) + np.float32(-(1 + 2**-11)),
    ),
]


def main():
    backend = get_backend("cpu")
    device = backend.devices()[0]
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    for what, module, inputs, spec in CASES:
        exe = backend.compile_and_load(module, [device], options)
        out = np.asarray(exe.execute([jax.device_put(np.asarray(x), device) for x in inputs])[0])
        spec = np.asarray(spec)
        same = out.tobytes() == spec.astype(out.dtype).tobytes()
        print(f"{what}:\n  StableHLO {spec.tolist()!r} ({spec.tobytes().hex()}), "
              f"XLA {out.tolist()!r} ({out.tobytes().hex()}): {'same' if same else 'differs'}")


if __name__ == "__main__":
    main()
