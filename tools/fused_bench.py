"""The workloads of `examples/fused_bench.rs` (bias + relu; add + relu of a transposed input; layer
norm, softmax over either dim, GELU, attention scores, a dense layer's backward, a batch norm; f32)
side by side in one run: xla_bcast's
compiled executable (allocating and into the caller's arrays), the same program op by op,
ndarray where it can say the workload, NumPy (allocating, and with `out=` where the workload
allows it), numexpr (2 threads, where it can express the workload) and XLA's CPU compiler
running the very text `to_stablehlo` prints (compiled once, outside the timing); `floor` is the
one-pass floor: the workload's inputs and outputs moved once at the rate of a parallel copy
measured in the same round; `one_op` is a one-op program (`x + b`, `b` a row) beside the same
op called directly (`add_bcast`, `add_bcast_into`: `direct`, `direct_into`). Rounds are
interleaved: each round runs the Rust example, then the Python systems (the order alternating).
Prints medians in ms, and the ratio of the fastest peer to the executable.

    python tools/fused_bench.py [rounds]

Needs numpy, numexpr (optional) and `jax==0.10.2` (optional).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import numexpr as ne
    ne.set_num_threads(2)
except ImportError:
    ne = None

try:
    import jax
    from jax._src import compiler
    from jax.extend.backend import get_backend
except ImportError:
    jax = None

# (size label, calls): the two square sizes of every workload, then real models' shapes
# (normalisation and softmax over the last dim; a batch norm over all dims but the last).
SIZES = [("512x512", 41), ("4096x4096", 7), ("8x512x1024", 11), ("4096x1024", 11),
         ("32x56x56x64", 11)]


def median_ms(calls, f):
    f()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def inputs_for(shapes):
    out = []
    for k, shape in enumerate(shapes):
        n = int(np.prod(shape))
        i = np.arange(n, dtype=np.uint64)
        v = (((i * 2654435761) & 0xFFFFFFFF) ^ k) % 2000
        out.append((v.astype(np.float32) * np.float32(0.004) - np.float32(4.0)).reshape(shape))
    return out


def numpy_systems(name, xs):
    """(system, callable) pairs for NumPy and numexpr."""
    s = []
    if name == "bias_relu":
        x, b = xs
        out = np.empty_like(x)
        s.append(("numpy", lambda: np.maximum(x + b, 0)))
        s.append(("numpy_out", lambda: np.maximum(np.add(x, b, out=out), 0, out=out)))
        if ne:
            s.append(("numexpr", lambda: ne.evaluate("where(x + b > 0, x + b, 0)", local_dict={"x": x, "b": b})))
    elif name == "transposed_add_relu":
        x, r = xs
        t = x.T
        out = np.empty(t.shape, dtype=np.float32)
        s.append(("numpy", lambda: np.maximum(t + r, 0)))
        s.append(("numpy_out", lambda: np.maximum(np.add(t, r, out=out), 0, out=out)))
        if ne:
            s.append(("numexpr", lambda: ne.evaluate("where(t + r > 0, t + r, 0)", local_dict={"t": t, "r": r})))
    elif name == "layer_norm":
        x, g, b = xs
        def f():
            mu = x.mean(axis=-1, keepdims=True)
            xc = x - mu
            var = (xc * xc).mean(axis=-1, keepdims=True)
            return xc / np.sqrt(var + np.float32(1e-5)) * g + b
        s.append(("numpy", f))
    elif name == "batch_norm":
        x, g, b = xs
        axes = tuple(range(x.ndim - 1))
        def f():
            mu = x.mean(axis=axes, keepdims=True)
            xc = x - mu
            var = (xc * xc).mean(axis=axes, keepdims=True)
            return xc * (g / np.sqrt(var + np.float32(1e-5))) + b
        s.append(("numpy", f))
    elif name.startswith("softmax"):
        (x,) = xs
        axis = -1 if name == "softmax_last" else 0
        out = np.empty_like(x)
        def f():
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
        def g():
            np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
            np.exp(out, out=out)
            np.divide(out, out.sum(axis=axis, keepdims=True), out=out)
        s.append(("numpy", f))
        s.append(("numpy_out", g))
        if ne:
            def h():
                m = x.max(axis=axis, keepdims=True)
                e = ne.evaluate("exp(x - m)", local_dict={"x": x, "m": m})
                t = e.sum(axis=axis, keepdims=True)
                return ne.evaluate("e / t", local_dict={"e": e, "t": t})
            s.append(("numexpr", h))
    elif name == "gelu":
        (x,) = xs
        k = np.float32(np.sqrt(2 / np.pi))
        s.append(("numpy", lambda: 0.5 * x * (1 + np.tanh(k * (x + np.float32(0.044715) * x ** 3)))))
        if ne:
            s.append(("numexpr", lambda: ne.evaluate("0.5 * x * (1 + tanh(k * (x + 0.044715 * x * x * x)))",
                                                             local_dict={"x": x, "k": k})))
    elif name == "attention":
        x, mask = xs
        def f():
            y = x * np.float32(0.125) + mask
            e = np.exp(y - y.max(axis=3, keepdims=True))
            return e / e.sum(axis=3, keepdims=True)
        s.append(("numpy", f))
    elif name == "dense_backward":
        dy, z = xs
        def f():
            dz = np.where(z > 0, dy, np.float32(0))
            return dz, dz.sum(axis=0)
        s.append(("numpy", f))
        if ne:
            def h():
                dz = ne.evaluate("where(z > 0, dy, 0)", local_dict={"z": z, "dy": dy})
                return dz, dz.sum(axis=0)
            s.append(("numexpr", h))
    return s


def python_round(modules, xla):
    got = {}
    for size, calls in SIZES:
        for mod in modules:
            if mod["size"] != size:
                continue
            xs = inputs_for(mod["shapes"])
            for system, f in numpy_systems(mod["name"], xs):
                got[(mod["name"], size, system)] = median_ms(calls, f)
            if xla is not None:
                backend, device, options = xla
                exe = backend.compile_and_load(mod["module"], [device], options)
                args = [jax.device_put(x, device) for x in xs]
                def run():
                    for o in exe.execute(args):
                        o.block_until_ready()
                got[(mod["name"], size, "xla")] = median_ms(calls, run)
    return got


def rust_round():
    out = subprocess.run(["cargo", "run", "--release", "-q", "--example", "fused_bench"],
                         capture_output=True, text=True, check=True).stdout
    got = {}
    for line in out.split("\n"):
        if line:
            name, size, system, ms = line.split()
            got[(name, size, system)] = float(ms)
    return got


def main(rounds):
    path = os.path.join(tempfile.mkdtemp(), "modules.json")
    subprocess.run(["cargo", "run", "--release", "-q", "--example", "fused_bench", path],
                   check=True, capture_output=True)
    modules = json.load(open(path))
    xla = None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        backend = get_backend("cpu")
        xla = (backend, backend.devices()[0],
               compiler.get_compile_options(num_replicas=1, num_partitions=1))
    samples = []
    for r in range(rounds):
        parts = [rust_round, lambda: python_round(modules, xla)]
        if r % 2:
            parts.reverse()
        merged = {}
        for part in parts:
            merged.update(part())
        samples.append(merged)
    order = [label for label, _ in SIZES]
    keys = sorted(samples[0], key=lambda k: (order.index(k[1]), k[0], k[2]))
    med = {k: statistics.median(s[k] for s in samples if k in s) for k in keys}
    print(f"f32, medians of {rounds} interleaved rounds, ms; numpy {np.__version__}"
          + (f", numexpr {ne.__version__} (2 threads)" if ne else "")
          + (f", jax {jax.__version__}" if jax else "") + "\n")
    systems = ["executable", "executable_into", "op_by_op", "direct", "direct_into", "zip_into",
               "rows_into", "ndarray_ops", "ndarray_zip_into", "numpy", "numpy_out", "numexpr", "xla",
               "floor"]
    print("| workload | size | " + " | ".join(systems) + " | fastest peer / executable (into) |")
    print("|---|---|" + "---|" * (len(systems) + 1))
    for name, size in dict.fromkeys((k[0], k[1]) for k in keys):
        row = [med.get((name, size, s)) for s in systems]
        peers = [med[(name, size, s)] for s in ("numpy", "numpy_out", "numexpr", "xla")
                 if (name, size, s) in med]
        ratio = ""
        if peers:
            best = min(peers)
            ratio = (f"{best / med[(name, size, 'executable')]:.2f} "
                     f"({best / med[(name, size, 'executable_into')]:.2f})")
        cells = ["" if v is None else f"{v:.3f}" for v in row]
        print(f"| {name} | {size} | " + " | ".join(cells) + f" | {ratio} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
