"""Per-element time of exp, log, tanh, logistic, sin and sqrt on f32: xla_bcast's programs
(`examples/math_bench.rs`, allocating) against NumPy's ufuncs (allocating, and with `out=`),
sampled in interleaved rounds of one run. Prints medians in ns per element and the ratio
NumPy / xla_bcast (> 1: xla_bcast is faster).

    python tools/math_bench.py [rounds]
"""

import statistics
import subprocess
import sys
import time

import numpy as np

OPS = {"exp": np.exp, "log": np.log, "tanh": np.tanh,
       "logistic": lambda x, out=None: np.divide(1.0, 1.0 + np.exp(-x), out=out),
       "sin": np.sin, "sqrt": np.sqrt}


def numpy_round():
    got = {}
    for n in (512, 4096):
        x = ((np.arange(n * n) % 1000) * 0.005 + 0.001).astype(np.float32).reshape(n, n)
        out = np.empty_like(x)
        calls = 20 if n == 512 else 3
        for name, f in OPS.items():
            for form in ("alloc", "out"):
                best = float("inf")
                for _ in range(5):
                    t = time.perf_counter()
                    for _ in range(calls):
                        f(x) if form == "alloc" else f(x, out=out)
                    best = min(best, (time.perf_counter() - t) / calls)
                got[(name, n, form)] = best * 1e9 / (n * n)
    return got


def crate_round():
    out = subprocess.run(["cargo", "run", "--release", "-q", "--example", "math_bench"],
                         capture_output=True, text=True, check=True).stdout
    got = {}
    for line in out.split("\n"):
        if line:
            name, n, ns = line.split()
            got[(name, int(n))] = float(ns)
    return got


def main(rounds):
    subprocess.run(["cargo", "build", "--release", "-q", "--example", "math_bench"], check=True)
    crate, numpy = [], []
    for r in range(rounds):
        if r % 2 == 0:
            crate.append(crate_round()); numpy.append(numpy_round())
        else:
            numpy.append(numpy_round()); crate.append(crate_round())
    print(f"f32, medians of {rounds} interleaved rounds, ns per element; numpy {np.__version__}\n")
    print("| op | n² | xla_bcast (allocating) | NumPy allocating | NumPy `out=` | NumPy alloc / xla_bcast |")
    print("|---|---|---|---|---|---|")
    for n in (512, 4096):
        for name in OPS:
            c = statistics.median(g[(name, n)] for g in crate)
            a = statistics.median(g[(name, n, "alloc")] for g in numpy)
            o = statistics.median(g[(name, n, "out")] for g in numpy)
            print(f"| {name} | {n}² | {c:.3f} | {a:.3f} | {o:.3f} | {a / c:.2f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
