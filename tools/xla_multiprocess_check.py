"""Runs the sharded programs `tests/stablehlo_export.rs` exported (`XLA_BCAST_SPMD_EXPORT`) on
JAX's multi-process runtime: N processes on the loopback (default 2), each with its share of
the 8 CPU devices, joined by `jax.distributed.initialize`, collectives over gloo. Each process
compiles every program's StableHLO text with the SPMD partitioner over the global mesh, builds
only its addressable shards of every input from the program's shardings
(`jax.make_array_from_callback`), runs, and checks its local shards of every output against
the crate's own result, bit for bit where `tools/xla_spmd_check.py` is (the same comparison).

    python tools/xla_multiprocess_check.py spmd.json [--processes 2] [--sample 120] [--seed 1]
        [--timeout 600] [--wrong-sharding] [--gspmd]

The programs are Shardy's text on Shardy's partitioner, and a process whose log shows XLA's
GSPMD warning fails the run; `--gspmd` runs their GSPMD form on GSPMD's partitioner.

`--sample K` runs the workloads (layer norm, softmax, attention, dense backward) and K other
programs picked at random (all of them when K is at least their number). `--wrong-sharding`
exports every input's data as one sharding says and the program as another: the check must
then fail, and the script exits 0 only if it does. Every process binds 127.0.0.1 only; the
processes are ended on success, failure or time-out. Prints the counts, the collectives XLA
inserted in programs whose devices span processes, and the time; exits 1 on any failure.
"""

import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICES = 8
WORKLOADS = ("layer_norm", "softmax", "attention", "dense_backward")


def workload(case):
    return case["name"].split("/")[0].removeprefix("spmd ") in WORKLOADS


def pick(cases, sample, seed):
    """The workloads and `sample` other programs at random (indices into `cases`)."""
    fixed = [k for k, c in enumerate(cases) if workload(c)]
    others = [k for k, c in enumerate(cases) if not workload(c)]
    if sample < len(others):
        others = sorted(random.Random(seed).sample(others, sample))
    return fixed + others


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wrong(case):
    """The case with its program exported under another sharding of its first input than its
    data is given in: the first split dim moved to another dim, or a replicated dim split."""
    specs = [list(map(list, s)) for s in case["in_specs"]]
    for spec in specs:
        split = [d for d, axes in enumerate(spec) if axes]
        if split and len(spec) > 1:
            d = split[0]
            spec[d], spec[(d + 1) % len(spec)] = spec[(d + 1) % len(spec)], spec[d]
            break
    else:
        return None
    c = dict(case)
    c["data_specs"] = specs  # the data as this says; the program as its own specs say
    return c


def groups(line, count):
    """The device groups of a collective in HLO text (partition numbers): its replica groups,
    explicit (`{{0,1},{2,3}}`) or as an iota (`[2,4]<=[4,2]T(1,0)`), or its permute's pairs;
    an empty list of groups means all devices."""
    import numpy as np
    m = re.search(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}", line)
    if m:
        return [list(map(int, g)) for g in re.findall(r"\{(\d+),(\d+)\}", m.group(1))]
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", line)
    if m:
        dims = [int(x) for x in m.group(3).split(",")]
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        if m.group(4):
            ids = ids.transpose([int(x) for x in m.group(4).split(",")])
        return ids.reshape(int(m.group(1)), int(m.group(2))).tolist()
    m = re.search(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}", line)
    if m:
        found = [[int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}", m.group(1))]
        if found and all(found):
            return found
    return [list(range(count))]


# ---------------------------------------------------------------------------------------------
# A worker: one of the N processes.

def worker(args):
    import numpy as np
    import jax
    from jax._src import xla_bridge
    from jax.extend.backend import get_backend
    from jax.sharding import Mesh, NamedSharding

    sys.path.insert(0, HERE)
    import xla_check  # the arrays and the comparison
    from xla_spmd_check import COLLECTIVES, compile_options, pspec  # the single-process check's

    # Gloo's TCP transport on the loopback only (by default it binds the host name's address).
    make = xla_bridge._jax.make_gloo_tcp_collectives
    xla_bridge._jax.make_gloo_tcp_collectives = (
        lambda distributed_client, **kw: make(distributed_client, hostname="127.0.0.1"))
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_enable_x64", True)
    address = f"127.0.0.1:{args.port}"
    jax.distributed.initialize(coordinator_address=address, coordinator_bind_address=address,
                               num_processes=args.processes, process_id=args.process_id,
                               initialization_timeout=120)
    me = jax.process_index()
    backend = get_backend("cpu")
    devices = backend.devices()  # global, ordered by id: each process's in a block
    assert len(devices) == DEVICES, f"{len(devices)} devices, not {DEVICES}"
    cases = json.load(open(args.cases))

    passed, failed, crossing, spanning = 0, 0, Counter(), 0
    for case in cases:
        try:
            names = [n for n, _ in case["mesh"]]
            sizes = {n: s for n, s in case["mesh"]}
            count = int(np.prod(list(sizes.values())))
            mesh = Mesh(np.array(devices[:count]).reshape([sizes[n] for n in names]), names)
            options = compile_options(count, [d.id for d in devices[:count]], args.gspmd)
            module = case["module_gspmd" if args.gspmd else "module"]
            exe = backend.compile_and_load(module, devices[:count], options)
            arrays = [xla_check.array(t) for t in case["inputs"]]
            data_specs = case.get("data_specs", case["in_specs"])
            # Only this process's shards are made, each cut from the whole array as its
            # sharding's index says (every process holds the whole inputs of the corpus: the
            # check needs them, a real job would read its shards from storage).
            args_ = []
            for a, s in zip(arrays, data_specs):
                sharding = NamedSharding(mesh, pspec(s))
                args_.append(jax.make_array_from_callback(a.shape, sharding, lambda i, a=a: a[i]))
            results = exe.execute_sharded(args_).disassemble_into_single_device_arrays()
            wants = [xla_check.array(t) for t in case["outputs"]]
            ulps = case.get("ulps", 0)
            ok, detail = len(results) == len(wants), ""
            for k, (shards, want, spec) in enumerate(zip(results, wants, case["out_specs"])):
                sharding = NamedSharding(mesh, pspec(spec))
                index = sharding.addressable_devices_indices_map(want.shape)
                for shard in shards:
                    got = np.asarray(shard)
                    w = want[index[list(shard.devices())[0]]]
                    got, w = xla_check.allowed(case, [got], [w])
                    got, w = got[0], w[0]
                    if not xla_check.same(got, w, 1 << 30 if case.get("measure_ulps") else ulps):
                        ok, detail = False, f"output {k} on {shard.devices()}: xla {got} crate {w}"
            # The collectives whose groups hold devices of more than one process.
            owner = [d.process_index for d in devices[:count]]
            kinds = set()
            for line in exe.hlo_modules()[0].to_string().splitlines():
                kind = next((c for c in COLLECTIVES
                             if f" {c}(" in line or f" {c}-start(" in line), None)
                if kind and any(len({owner[i] for i in g}) > 1 for g in groups(line, count)):
                    kinds.add(kind)
            crossing.update(kinds)
            spanning += bool(kinds)
        except Exception as e:  # a module XLA refuses is a failure too
            ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAILED {case['name']} (process {me}): {detail}"[:2000], flush=True)
    print(json.dumps({"process": me, "passed": passed, "failed": failed,
                      "collectives": dict(crossing), "spanning": spanning}), flush=True)
    jax.distributed.shutdown()
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# The parent: starts the workers, waits, ends them, sums up.

def run(path, processes, sample, seed, timeout, wrong_sharding, gspmd):
    if DEVICES % processes:
        sys.exit(f"{processes} processes cannot share {DEVICES} devices evenly")
    sys.path.insert(0, HERE)
    from xla_check import GSPMD_WARNINGS  # noqa: E402  (the single-process checks' list)
    cases = json.load(open(path))["cases"]
    chosen = [cases[k] for k in pick(cases, sample, seed)]
    if wrong_sharding:
        chosen = [c for c in map(wrong, chosen) if c is not None]
    work = tempfile.mkdtemp()
    with open(os.path.join(work, "cases.json"), "w") as f:
        json.dump(chosen, f)
    port = free_port()
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES // processes}"
    env.pop("JAX_COORDINATOR_BIND_ADDRESS", None)
    started = time.time()
    procs, logs = [], []
    try:
        for i in range(processes):
            log = open(os.path.join(work, f"process{i}.log"), "w+")
            logs.append(log)
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", "--processes",
                 str(processes), "--process-id", str(i), "--port", str(port), "--cases",
                 os.path.join(work, "cases.json")] + (["--gspmd"] if gspmd else []),
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        deadline = started + timeout
        while any(p.poll() is None for p in procs):
            if time.time() > deadline:
                print(f"timed out after {timeout} s", flush=True)
                break
            if any(p.poll() not in (None, 0) for p in procs):
                time.sleep(5)  # let the others report; a peer's failure may stall them
                break
            time.sleep(0.5)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    elapsed = time.time() - started
    summaries, failures = [], []
    for i, log in enumerate(logs):
        log.seek(0)
        text = log.read()
        log.close()
        lines = text.splitlines()
        summaries += [json.loads(l) for l in lines if l.startswith('{"process"')]
        failures += [l for l in lines if l.startswith("FAILED")]
        if not gspmd and any(w in text for w in GSPMD_WARNINGS):
            failures.append(f"FAILED process {i}: XLA's GSPMD partitioner ran on Shardy's text")
        if procs[i].returncode not in (0, 1) or not any(l.startswith('{"process"') for l in lines):
            said = [l for l in lines if not re.match(r"[WI]\d{4} ", l)]  # not XLA's logging
            failures.append(f"process {i} ended with {procs[i].returncode}: "
                            + " | ".join(said[-5:])[:2000])
    for line in failures[:40]:
        print(line)
    passed = min((s["passed"] for s in summaries), default=0)
    failed = len(chosen) - passed if len(summaries) == processes else len(chosen)
    # Every process compiles the same partitioned programs: process 0's view stands for all.
    first = next((s for s in summaries if s["process"] == 0), {"collectives": {}, "spanning": 0})
    collectives = first["collectives"]
    ok = len(summaries) == processes and not failures
    print(f"{processes} processes x {DEVICES // processes} devices: {len(chosen)} programs "
          f"({sum(map(workload, chosen))} workloads), {passed} passed on every process, "
          f"{failed} failed; {elapsed:.0f} s")
    print(f"programs with a collective across processes: {first['spanning']}; programs by "
          f"collective: {collectives if collectives else 'none'}")
    if wrong_sharding:
        print("wrong shardings: " + ("caught" if not ok else "NOT caught"))
        return 0 if not ok else 1
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--sample", type=int, default=1 << 30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--wrong-sharding", action="store_true")
    parser.add_argument("--gspmd", action="store_true")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--port", type=int)
    parser.add_argument("--cases")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    return run(args.corpus, args.processes, args.sample, args.seed, args.timeout,
               args.wrong_sharding, args.gspmd)


if __name__ == "__main__":
    sys.exit(main())
