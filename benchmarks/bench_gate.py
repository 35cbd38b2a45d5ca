"""Benchmark (issue "CI at scale"): the gate over many checkpoints and a training sweep,
serial vs ``--jobs 2`` (local worker processes) vs Ray, measured in one run.

The gate: ``N`` (default 200) lending-1 checkpoints - the example PPO checkpoint with
seeded perturbations of its weights - each in its own spec (|C| <= 0.05), gated by
``causalfair gate`` in a fresh process per backend. Engine: Monte Carlo with 200,000
individuals per group (about 0.6 s per audit here), or ``--engine exact`` (a few
milliseconds per audit: the gate is then all fixed costs, and workers cannot help). The sweep: ppo and ppo-c x
``--sweep-seeds`` seeds (default 4: 8 runs; 8 gives the issue's 16 runs) x ``--sweep-iterations``
(default 20) iterations on
lending-1 (``causalfair sweep``), also with ``--jobs auto`` (one worker per core this
process may use).

Printed per backend: wall time, its ratio to serial (> 1 is faster), and the fixed costs:
start-up (the same command on 2 specs / 1 run: interpreter, imports, worker or Ray start)
and peak memory of the whole process tree (driver, workers, and for Ray its daemons;
sampled from /proc every 50 ms, Linux only); for the gate also the CPU time (user + system)
and minor page faults of the command and its workers (those it waited for). Ray runs start
a local Ray instance with 2 CPUs for each command (what ``--backend ray`` does without a
cluster), so their start-up includes Ray's own. A sweep's start-up includes no
``torch._dynamo`` import (training steps with ``causalfair.train.adam.Adam``;
``torch.optim.Adam`` imports it on first use: 1.3 s more per process on our 2-core machine,
docs/scale.md).

Workers: one torch / BLAS thread each; idle workers get the end of their input together
and exit without the interpreter's teardown (which takes seconds once torch is loaded:
stopping 16 workers one after the other used to cost more than the audits).

``--reports``: the gate also writes every spec's report (``gate --reports DIR``), and
each gate row adds the driver's own CPU time (the command's process, without its
workers): with workers the reports are rendered where the audits ran and the driver only
writes them. The report folders of every backend are compared with the serial gate's,
byte for byte (audit.json's ``seconds``, the audit's wall time, and the digest of
audit.json that annex-iv.md quotes aside).

Run: ``python benchmarks/bench_gate.py [--n 200] [--jobs 2] [--no-ray] [--no-sweep] [--no-gate]
[--reports]``; the reports' figures: ``python benchmarks/bench_gate.py --n 8 --engine exact
--no-ray --no-sweep --reports``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CK = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"


def _tree_rss_mb(root: int) -> float:
    """Resident memory of ``root`` and all its descendants (MB), from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/statm") as fh:
                rss[int(d)] = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    total, stack = 0, [root]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total / 2**20


#: Runs the command line in this process and writes its own CPU time (user + system,
#: without its children) to the file named by the first argument, at exit.
_DRIVER_CPU = ("import atexit, resource, sys, runpy\n"
               "out = sys.argv.pop(1)\n"
               "def cpu():\n"
               "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
               "    open(out, 'w').write(str(u.ru_utime + u.ru_stime))\n"
               "atexit.register(cpu)\n"
               "sys.argv[0] = 'causalfair'\n"
               "runpy.run_module('causalfair', run_name='__main__')\n")


def _folders(root: Path) -> dict[str, bytes]:
    """The report folders' files, name -> bytes; audit.json without ``seconds``,
    ``provenance.date`` (when it ran) and ``provenance.kernels.torch_cpu_capability``
    (recorded where the process that ran the audit had loaded torch, e.g. for an earlier
    spec: a worker may not have), the pages without the date they state, and annex-iv.md
    without the audit.json digest (what differs from run to run)."""
    from causalfair.report.card import without_date

    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "audit.json":
                doc = json.loads(data)
                doc.pop("seconds", None)
                doc.get("provenance", {}).pop("date", None)
                doc.get("provenance", {}).get("kernels", {}).pop("torch_cpu_capability", None)
                data = json.dumps(doc, sort_keys=True).encode()
            elif p.name == "annex-iv.md":
                data = b"\n".join(x for x in without_date(data).splitlines()
                                  if b"audit.json SHA-256" not in x)
            elif p.suffix in (".md", ".html"):
                data = without_date(data)
            out[str(p.relative_to(root))] = data
    return out


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time (s) and peak tree memory (MB) of a command; raises if it fails. Its
    tree's CPU seconds (user + system) and minor page faults, of every process of it that
    was waited for (the command, its workers), go to :data:`LAST_TREE`."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss_mb(proc.pid))
            time.sleep(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    _, err = proc.communicate()
    th.join()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_TREE[:] = [r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
                    r1.ru_minflt - r0.ru_minflt]
    if proc.returncode not in (0, 1) or b"Traceback" in err:  # 1: a gate that fails
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    return wall, peak[0]


#: The CPU seconds and minor page faults of the last :func:`_run`'s process tree.
LAST_TREE: list[float] = [0.0, 0.0]


def _make_specs(folder: Path, n: int, engine: str) -> list[str]:
    import json

    import numpy as np
    import torch

    from causalfair.policies.checkpoint import FeatureEncoding, save_checkpoint

    blob = torch.load(CK, weights_only=True)
    meta = json.loads(blob["meta_json"])
    arch, enc = meta["architecture"], FeatureEncoding.from_dict(meta["encoding"])
    from causalfair.policies.checkpoint import mlp

    net = mlp(arch["input_dim"], tuple(arch["hidden"]), arch["output_dim"])
    base = {k: v.clone() for k, v in blob["state_dict"].items()}
    rng = np.random.default_rng(0)
    specs = []
    for i in range(n):
        sd = {k: v + torch.from_numpy(rng.normal(0, 0.05, tuple(v.shape))).to(v.dtype)
              for k, v in base.items()}
        net.load_state_dict(sd)
        save_checkpoint(folder / f"c{i:03d}.pt", net, architecture=arch, encoding=enc,
                        metadata={"name": f"c{i:03d}"})
        spec = folder / f"c{i:03d}.toml"
        spec.write_text(f'name = "c{i:03d}"\nhorizon = 20\n[system]\nid = "lending-1"\n'
                        f'[policy]\ncheckpoint = "c{i:03d}.pt"\n[engine]\n{engine}\n'
                        "[thresholds]\nabs_C = 0.05\n")
        specs.append(str(spec))
    return specs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="checkpoints gated (default 200)")
    ap.add_argument("--engine", choices=("mc", "exact"), default="mc",
                    help="the specs' engine (default: mc, n = 200000)")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray backend")
    ap.add_argument("--no-sweep", action="store_true", help="skip the sweep")
    ap.add_argument("--no-gate", action="store_true", help="skip the gate")
    ap.add_argument("--jobs", type=int, default=2, help="workers of the parallel rows (default 2)")
    ap.add_argument("--reports", action="store_true",
                    help="the gate writes every spec's report (--reports); adds the driver's "
                         "CPU time and compares the report folders with the serial gate's")
    ap.add_argument("--sweep-seeds", type=int, default=4,
                    help="seeds per algorithm in the sweep (default 4: 8 runs)")
    ap.add_argument("--sweep-iterations", type=int, default=20,
                    help="iterations per sweep run (default 20; the trainer's own default is "
                         "100: longer runs weigh each worker's start-up less)")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               RAY_USAGE_STATS_ENABLED="0", CAUSALFAIR_PROGRESS_SECONDS="3600")
    env.pop("RAY_ADDRESS", None)
    cli = [sys.executable, "-m", "causalfair"]
    j = str(args.jobs)
    backends = [("serial", []), (f"--jobs {j}", ["--jobs", j])]
    if not args.no_ray:
        backends.append((f"ray (local, {j} CPUs)", ["--backend", "ray", "--jobs", j]))
    print(f"machine: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} in this process's "
          f"affinity mask; python {sys.version.split()[0]}")
    # --jobs auto counts OMP_NUM_THREADS-style caps: its row runs without them (every
    # worker still uses one thread)
    env_auto = {k: v for k, v in env.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        engine = 'kind = "mc"\nn = 200000' if args.engine == "mc" else 'kind = "exact"'
        specs = [] if args.no_gate else _make_specs(folder, args.n, engine)
        what = "Monte Carlo, n = 200000 per group" if args.engine == "mc" else "exact engine"
        if specs:
            print(f"\ngate over {args.n} checkpoints ({what}, lending-1, T = 20"
                  + (", with --reports)" if args.reports else ")"))
            print(f"{'backend':22s} {'wall s':>8s} {'vs serial':>10s} {'start-up s':>11s} "
                  f"{'peak MB':>8s} {'CPU s':>7s} {'faults':>10s}"
                  + (f" {'driver CPU s':>13s} {'reports':>8s}" if args.reports else ""))
        serial = None
        first: dict[str, bytes] | None = None
        for k, (label, extra) in enumerate(backends if specs else ()):
            out = folder / "g.json"
            run = cli
            if args.reports:  # the driver's own CPU time, and the report folders
                cpu_file = folder / f"cpu{k}"
                run = [sys.executable, "-c", _DRIVER_CPU, str(cpu_file)]
                extra = [*extra, "--reports", str(folder / f"reports{k}")]
            start, _ = _run([*run, "gate", *specs[:2], *extra, "--json", str(out)], env)
            wall, peak = _run([*run, "gate", *specs, *extra, "--json", str(out)], env)
            serial = serial or wall
            row = (f"{label:22s} {wall:8.1f} {serial / wall:10.2f} {start:11.1f} {peak:8.0f} "
                   f"{LAST_TREE[0]:7.1f} {LAST_TREE[1]:10,.0f}")
            if args.reports:
                got = _folders(folder / f"reports{k}")
                first = first if first is not None else got
                row += (f" {float(cpu_file.read_text()):13.2f} "
                        f"{'same' if got == first else 'DIFFER':>8s}")
            print(row)
        if specs and args.reports:
            print("driver CPU: the gate command's own process (its workers excluded); "
                  "reports: the folders against the serial gate's, byte for byte "
                  "(audit.json's seconds aside)")
        if not args.no_sweep:
            k = args.sweep_seeds
            print(f"\nsweep: ppo, ppo-c x seeds 0-{k - 1} x {args.sweep_iterations} iterations "
                  f"on lending-1 "
                  f"({2 * k} runs)")
            print(f"{'backend':22s} {'wall s':>8s} {'vs serial':>10s} {'start-up s':>11s} "
                  f"{'peak MB':>8s}")
            serial = None
            for i, (label, extra) in enumerate([*backends, ("--jobs auto", ["--jobs", "auto"])]):
                base = [*cli, "sweep", "--system", "lending-1"]
                e = env_auto if "auto" in extra else env
                start, _ = _run([*base, "--algo", "ppo", "--seeds", "0", "--iterations", "1",
                                 "--out", str(folder / f"s{i}a"), *extra], e)
                wall, peak = _run([*base, "--algo", "ppo,ppo-c", "--seeds", f"0-{k - 1}",
                                   "--iterations", str(args.sweep_iterations),
                                   "--out", str(folder / f"s{i}b"), *extra],
                                  e)
                serial = serial or wall
                print(f"{label:22s} {wall:8.1f} {serial / wall:10.2f} {start:11.1f} {peak:8.0f}")
    print("\nstart-up: the same command on 2 specs (the gate) or 1 run of 1 iteration (the "
          "sweep); ratios > 1 are speed-ups over serial. CPU s and faults (the gate): user + "
          "system seconds and minor page faults of the command and its workers.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
