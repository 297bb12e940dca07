"""Runs the programs `tests/stablehlo_export.rs` exported (StableHLO text, inputs, and the
crate's outputs as raw little-endian bytes) on XLA's CPU compiler through JAX, and compares
XLA's results with the crate's bit for bit (any NaN equal to any NaN). Prints `N passed,
N failed`; exits 1 on any failure.

    python tools/xla_check.py corpus.json

Needs `jax==0.10.2` (its API for compiling StableHLO text carries no compatibility promise).
"""

import contextlib
import json
import os
import sys
import tempfile

import numpy as np
import jax
from jax._src import compiler
from jax.extend.backend import get_backend

# Without it, 64-bit inputs silently become 32-bit ones.
jax.config.update("jax_enable_x64", True)

try:
    import ml_dtypes

    BF16 = ml_dtypes.bfloat16
except ImportError:  # only bf16 needs it
    BF16 = None

DTYPES = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
    "f16": np.float16, "bf16": BF16, "f32": np.float32, "f64": np.float64,
    "complex<f32>": np.complex64, "complex<f64>": np.complex128,
}


# What XLA prints when a module reaches GSPMD's partitioner (its own attributes, or Shardy's
# falling back to it): a run with Shardy's text must print neither.
GSPMD_WARNINGS = ("GSPMD sharding propagation is going to be deprecated",
                  "falling back to using GSPMD")


@contextlib.contextmanager
def captured_stderr(seen):
    """Runs the block with file descriptor 2 (XLA's C++ logging) in a temporary file, then
    prints what it held to stderr and appends its text to the list `seen`."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            text = f.read().decode(errors="replace")
            sys.stderr.write(text)
            seen.append(text)


def array(t):
    dtype = np.dtype(DTYPES[t["type"]])
    return np.frombuffer(bytes.fromhex(t["bytes"]), dtype=dtype).reshape(t["shape"])


def ulps_apart(g, w):
    """How many representable values lie between float arrays `g` and `w`, elementwise."""
    bits = f"i{g.itemsize}"
    order = lambda x: np.where(x.view(bits) < 0, np.iinfo(bits).min - x.view(bits), x.view(bits))
    return np.abs(order(g).astype(np.int64) - order(w).astype(np.int64))


def flushed(got, want):
    """`got` with XLA's zeros put back where `want` is subnormal: XLA's CPU code for some
    transcendental ops flushes subnormal results to zero (README)."""
    if got.dtype.kind != "f" and not (BF16 is not None and got.dtype == np.dtype(BF16)):
        return got
    tiny = np.float32(np.finfo(np.float32).tiny) if got.dtype == np.dtype(BF16 or "f4") \
        else np.finfo(got.dtype).tiny
    w = want.astype(np.float64)
    sub = (got.astype(np.float64) == 0) & (np.abs(w) < tiny) & (w != 0)
    return np.where(sub, want, got)


def allowed(case, outs, wants):
    """XLA's results and the crate's with the differences the case allows taken out: XLA's
    zeros where the crate's results are subnormal (`flushes`), and the sign of zeros
    (`signed_zeros`: adding +0 makes -0 +0)."""
    if case.get("flushes", False):
        outs = [flushed(g, w) for g, w in zip(outs, wants)]
    if case.get("signed_zeros", False):
        outs = [o + 0 if o.dtype.kind in "fc" else o for o in outs]
        wants = [w + 0 if w.dtype.kind in "fc" else w for w in wants]
    return outs, wants


def same(got, want, ulps=0):
    """Bit for bit, with every NaN equal to every NaN (per component for complex); floats within
    `ulps` representable values where the case allows it."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if BF16 is not None and got.dtype == np.dtype(BF16):
        # numpy does not see bfloat16 as a float: compare as float32 values and bf16 bits.
        g, w = got.astype(np.float32), want.astype(np.float32)
        nan = np.isnan(g) & np.isnan(w)
        if not np.array_equal(np.isnan(g), np.isnan(w)):
            return False
        if ulps:
            # bf16 is the top half of an f32: one bf16 step is 2^16 f32 steps.
            return bool(np.all(ulps_apart(g[~nan], w[~nan]) <= ulps << 16))
        return np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    if ulps and got.dtype.kind == "c":
        # Complex results: within `ulps` machine epsilons of the modulus (a part much smaller
        # than the modulus carries the modulus's rounding, not its own).
        for g, w in [(got.real, want.real), (got.imag, want.imag)]:
            if not np.array_equal(np.isnan(g), np.isnan(w)):
                return False
            if not np.array_equal(g[np.isinf(w)], w[np.isinf(w)]):
                return False
        finite = np.isfinite(want.real) & np.isfinite(want.imag)
        eps = np.finfo(want.real.dtype).eps
        err = np.abs(got[finite].astype(np.complex128) - want[finite].astype(np.complex128))
        return bool(np.all(err <= ulps * eps * np.abs(want[finite].astype(np.complex128))))
    if ulps and got.dtype.kind == "f":
        nan = np.isnan(got) & np.isnan(want)
        return bool(np.array_equal(np.isnan(got), np.isnan(want))
                    and np.all(ulps_apart(got[~nan], want[~nan]) <= ulps))
    if got.dtype.kind in "fc":
        parts = [(got, want)] if got.dtype.kind == "f" else [
            (got.real, want.real), (got.imag, want.imag)]
        for g, w in parts:
            nan = np.isnan(g.astype(np.float64)) & np.isnan(w.astype(np.float64))
            if not np.array_equal(g.view(np.uint8 if g.itemsize == 1 else f"u{g.itemsize}")[~nan],
                                  w.view(np.uint8 if w.itemsize == 1 else f"u{w.itemsize}")[~nan]):
                return False
            if not np.array_equal(np.isnan(g.astype(np.float64)), np.isnan(w.astype(np.float64))):
                return False
        return True
    return np.array_equal(got, want)


def apart(outs, wants):
    """The largest distance in ulps between float results, for a failure's report."""
    try:
        worst = 0
        for g, w in zip(outs, wants):
            if g.dtype.kind == "f" and g.shape == w.shape and g.dtype == w.dtype:
                nan = np.isnan(g) | np.isnan(w)
                if np.any(np.isnan(g) != np.isnan(w)):
                    return "NaN where the other is a number; "
                worst = max(worst, int(ulps_apart(g[~nan], w[~nan]).max(initial=0)))
        return f"{worst} ulps apart; "
    except Exception:  # bf16 and others: no figure
        return ""


def main(path):
    backend = get_backend("cpu")
    device = backend.devices()[0]
    # Without these options XLA:CPU's max and min stop propagating NaN and ignore zero's sign.
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    cases = json.load(open(path))["cases"]
    passed, failed = 0, 0
    for case in cases:
        try:
            exe = backend.compile_and_load(case["module"], [device], options)
            args = [jax.device_put(array(t), device) for t in case["inputs"]]
            outs = [np.asarray(o) for o in exe.execute(args)]
            wants = [array(t) for t in case["outputs"]]
            ulps = case.get("ulps", 0)
            outs, wants = allowed(case, outs, wants)
            ok = len(outs) == len(wants) and all(same(g, w, ulps) for g, w in zip(outs, wants))
            detail = "" if ok else f"{apart(outs, wants)}xla {outs} crate {wants}"
        except Exception as e:  # a module XLA refuses is a failure too
            ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0]}"
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAILED {case['name']}: {detail}"[:2000])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
