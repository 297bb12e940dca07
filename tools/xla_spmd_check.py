"""Runs the sharded programs `tests/stablehlo_export.rs` exported (`XLA_BCAST_SPMD_EXPORT`) on
XLA's CPU backend with 8 host devices: each compiled with SPMD partitioning over its mesh, its
inputs split as their shardings say, its outputs gathered from the devices' shards, and
compared with the crate's `run` on the whole arrays (as `tools/xla_check.py` compares). From
the partitioned HLO it also confirms that XLA split the work: every parameter's shape on a
device is its shard's, and a program that reduces over a split dim has a cross-device
collective. Prints `N passed, N failed`, the collectives XLA inserted, and how many programs
XLA replicated entirely; exits 1 on any failure.

Each program is the text in Shardy's dialect, partitioned by Shardy (the compile options'
`use_shardy_partitioner`, as JAX sets it); the run fails if XLA prints that GSPMD's partitioner
ran. With `--gspmd`, the same programs in GSPMD's dialect on GSPMD's partitioner, for the
export option that keeps that form.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python tools/xla_spmd_check.py spmd.json [--gspmd]
"""

import json
import os
import re
import sys
from collections import Counter

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import numpy as np
import jax
from jax._src import compiler
from jax.extend.backend import get_backend
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xla_check  # noqa: E402  (the arrays and the comparison)

jax.config.update("jax_enable_x64", True)

COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "collective-permute")


def pspec(spec):
    return P(*[None if not axes else axes[0] if len(axes) == 1 else tuple(axes) for axes in spec])


def shard_shape(shape, spec, sizes):
    return [n // int(np.prod([sizes[a] for a in axes])) if axes else n
            for n, axes in zip(shape, spec)]


def gather(shards, shape, spec, names, sizes):
    """The global array from the devices' shards (device `d` at the mesh's row-major index `d`),
    each replica checked equal to the first."""
    out = None
    seen = {}
    for d, shard in enumerate(shards):
        shard = np.asarray(shard)
        if out is None:
            out = np.empty(shape, dtype=shard.dtype)
        coords = dict(zip(names, np.unravel_index(d, [sizes[n] for n in names])))
        index = []
        for n, axes in zip(shape, spec):
            k, count = 0, 1
            for a in axes:
                k = k * sizes[a] + coords[a]
                count *= sizes[a]
            step = n // count
            index.append(slice(k * step, (k + 1) * step))
        key = tuple((s.start, s.stop) for s in index)
        if key in seen:
            if not xla_check.same(shard, seen[key]):
                raise AssertionError(f"device {d} holds another replica than its peers")
            continue
        seen[key] = shard
        out[tuple(index)] = shard
    return out


def compile_options(count, device_ids, gspmd):
    """The compile options of a program over `count` devices: SPMD partitioning, by Shardy
    unless `gspmd` (JAX's own setting, `jax_use_shardy_partitioner`, decides it the same way)."""
    options = compiler.get_compile_options(
        num_replicas=1, num_partitions=count, device_assignment=np.array(device_ids).reshape(1, count))
    options.executable_build_options.use_spmd_partitioning = True
    options.executable_build_options.use_shardy_partitioner = not gspmd
    return options


def main(path, gspmd=False):
    seen = []
    with xla_check.captured_stderr(seen):
        code = check(path, gspmd)
    warned = any(w in text for text in seen for w in xla_check.GSPMD_WARNINGS)
    print(f"partitioner: {'GSPMD' if gspmd else 'Shardy'}; XLA's GSPMD warning "
          f"{'printed' if warned else 'not printed'}")
    if warned and not gspmd:
        print("FAILED: the Shardy run reached GSPMD's partitioner")
        return 1
    return code


def check(path, gspmd):
    backend = get_backend("cpu")
    devices = backend.devices()
    cases = json.load(open(path))["cases"]
    passed, failed, replicated = 0, 0, 0
    inserted = Counter()
    measured = []
    for case in cases:
        try:
            names = [n for n, _ in case["mesh"]]
            sizes = {n: s for n, s in case["mesh"]}
            count = int(np.prod(list(sizes.values())))
            mesh = Mesh(np.array(jax.devices()[:count]).reshape([sizes[n] for n in names]), names)
            options = compile_options(count, range(count), gspmd)
            module = case["module_gspmd" if gspmd else "module"]
            exe = backend.compile_and_load(module, devices[:count], options)
            arrays = [xla_check.array(t) for t in case["inputs"]]
            args = [jax.device_put(a, NamedSharding(mesh, pspec(s)))
                    for a, s in zip(arrays, case["in_specs"])]
            results = exe.execute_sharded(args).disassemble_into_single_device_arrays()
            wants = [xla_check.array(t) for t in case["outputs"]]
            outs = [gather(r, w.shape, s, names, sizes)
                    for r, w, s in zip(results, wants, case["out_specs"])]
            ulps = case.get("ulps", 0)
            outs, wants = xla_check.allowed(case, outs, wants)
            if case.get("measure_ulps"):
                # General floats summed over a split dim: measured, not compared.
                apart = max(int(xla_check.ulps_apart(g.ravel(), w.ravel()).max())
                            for g, w in zip(outs, wants))
                measured.append(apart)
                ulps = 1 << 30
            ok = len(outs) == len(wants) and all(
                xla_check.same(g, w, ulps) for g, w in zip(outs, wants))
            detail = "" if ok else f"xla {outs} crate {wants}"
            # The partitioned module: parameters at their shard shapes, collectives where a
            # reduction runs over a split dim.
            hlo = exe.hlo_modules()[0].to_string()
            entry = hlo[hlo.index("ENTRY"):]
            params = re.findall(r"= (\w+)\[([\d,]*)\]\{?[\d,]*\}? parameter\((\d+)\)", entry)
            for ty, dims, k in params:
                got = [int(x) for x in dims.split(",") if x]
                want = shard_shape(arrays[int(k)].shape, case["in_specs"][int(k)], sizes)
                if got != want:
                    ok, detail = False, f"parameter {k} is {got} on a device, not its shard {want}"
            found = [c for c in COLLECTIVES if f" {c}(" in entry or f"{c}-start(" in entry]
            inserted.update(found)
            if case.get("reduces_split") and not found:
                ok, detail = False, "a reduction over a split dim without a collective"
            if all(not axes for spec in case["in_specs"] for axes in spec):
                replicated += 1
        except Exception as e:  # a module XLA refuses is a failure too
            ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAILED {case['name']}: {detail}"[:2000])
    print(f"{passed} passed, {failed} failed")
    print(f"collectives in the partitioned programs: {dict(inserted)}")
    print(f"programs with every input replicated: {replicated} of {len(cases)}")
    if measured:
        print(f"general float sums over a split dim: {len(measured)} programs, at most "
              f"{max(measured)} ulps from the crate's order (median {sorted(measured)[len(measured) // 2]})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "--gspmd" in sys.argv[2:]))
