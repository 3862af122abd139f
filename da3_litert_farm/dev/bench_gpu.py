"""Profile the GPU check of one cell: where the GPU accelerator's time goes (nothing is asserted).

    python -m da3_litert_farm.dev.bench_gpu small-896-9x16 [--photos 3] [--perf] [--setting NAME:VAR=VALUE,...]
                                                 [--json FILE] [--record NAME]

Runs the cell's shipped file (artifacts/models/MODEL/TIER/ASPECT/model_fp16.tflite, built by `make farm`) as the
gpu stage does, once per --setting, each in a fresh process with that setting's environment
(the adapter, the shader caches and the driver's variables as a new `gpu@CELL` sees them), alone on
the machine. Per setting it prints and records:
- set-up: the adapter and device, from a probe graph of one op;
- compile: loading the shipped file on the accelerator (kernel selection, shader compilation),
  and the precision the adapter's arithmetic really has (an adapter without FP16 computes FP32);
- each inference: writing the input and submitting, the queue draining, reading the output back;
- the busy share of every core during each phase (/proc/stat);
- with --perf, where the process's CPU time went during the second inference (perf's samples by
  library; `[JIT]` is the shader code the software driver generated);
- per photo, 1 - r and the mean relative error against the official depth that validate@CELL saved,
  so a faster setting can be checked to compute the same FP16 result;
- the whole graph's throughput (its multiply-accumulates, from lint.json, per second of queue);
- with --ops, the same for graphs of one op at this aspect's token count (the ViT's MLP matmul
  and its attention scores), since neither ML Drift nor lavapipe reports time per kernel: if one
  op alone runs at the whole graph's rate, the time is the driver's arithmetic, not a slow op.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from da3_litert_farm.core import fileio, paths
from da3_litert_farm.core.cells import split_cell

DEFAULT_SETTING = "default:"


def cpu_times() -> list[tuple[int, int]]:
    """(busy, total) jiffies of every core, from /proc/stat."""
    out = []
    for line in Path("/proc/stat").read_text().splitlines():
        if re.match(r"cpu\d+ ", line):
            values = [int(v) for v in line.split()[1:]]
            idle = values[3] + values[4]  # idle + iowait
            out.append((sum(values) - idle, sum(values)))
    return out


def busy_shares(before: list[tuple[int, int]], after: list[tuple[int, int]]) -> list[float]:
    return [round((b1 - b0) / max(t1 - t0, 1), 2) for (b0, t0), (b1, t1) in zip(before, after)]


class Phase:
    """Wall seconds and per-core busy share of a block."""

    def __enter__(self):
        self.started, self.cpu = time.perf_counter(), cpu_times()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.started
        self.cores = busy_shares(self.cpu, cpu_times())
        return False

    def record(self, **extra) -> dict:
        return {"seconds": round(self.seconds, 2), "core_busy": self.cores, **extra}


def perf_start(pid: int, out: Path) -> subprocess.Popen | None:
    if shutil.which("perf") is None:
        return None
    return subprocess.Popen(["perf", "record", "-F", "199", "-p", str(pid), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def perf_shares(proc: subprocess.Popen | None, data: Path) -> dict[str, float]:
    """Share of perf's samples per library ('[JIT]' for generated code); {} without perf."""
    if proc is None:
        return {}
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    report = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "dso", "--stdio"],
                            capture_output=True, text=True).stdout
    return shares_by_library(report)


def shares_by_library(report: str) -> dict[str, float]:
    """perf report --sort dso lines ('  98.66%  [JIT] tid 17650') -> {library: percent}."""
    shares: dict[str, float] = {}
    for line in report.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(.+?)\s*$", line)
        if m:
            name = "[JIT]" if m[2].startswith("[JIT]") else m[2]
            shares[name] = round(shares.get(name, 0.0) + float(m[1]), 2)
    return shares


def op_graphs(tokens: int) -> dict[str, tuple[bytes, int]]:
    """One-op graphs at this token count: name -> (.tflite bytes, multiply-accumulates per run)."""
    import numpy as np
    from ai_edge_litert import schema_py_generated as s

    from da3_litert_farm.core.models import DEFAULT_PRESET, PRESETS
    from da3_litert_farm.gpu.gpu_runtime import one_op_model_bytes

    small = PRESETS[DEFAULT_PRESET]
    HEADS, MLP_HIDDEN, width = small.heads, small.mlp_hidden, small.embed_dim  # noqa: N806  (the op sizes)
    head_dim = width // HEADS
    rng = np.random.default_rng(0)
    fc = s.FullyConnectedOptionsT()
    fc.keepNumDims = True
    return {
        f"FULLY_CONNECTED [{tokens}, {width}] x [{width}, {MLP_HIDDEN}] (MLP)": (
            one_op_model_bytes("FULLY_CONNECTED", (1, tokens, width), (1, tokens, MLP_HIDDEN),
                               ("FullyConnectedOptions", fc), 0.05 * rng.standard_normal((MLP_HIDDEN, width))),
            tokens * width * MLP_HIDDEN),
        f"BATCH_MATMUL [{HEADS}, {tokens}, {head_dim}] x [{HEADS}, {head_dim}, {tokens}] (attention scores)": (
            one_op_model_bytes("BATCH_MATMUL", (HEADS, tokens, head_dim), (HEADS, tokens, tokens),
                               ("BatchMatMulOptions", s.BatchMatMulOptionsT()),
                               0.05 * rng.standard_normal((HEADS, head_dim, tokens))),
            HEADS * tokens * head_dim * tokens),
    }


def measure_ops(tokens: int, repeats: int = 5) -> list[dict]:
    """Each one-op graph run `repeats` times (the queue's busy time has a 1 s grain): GMAC/s."""
    import numpy as np

    from da3_litert_farm.gpu.gpu_runtime import GpuModel

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (data, macs) in op_graphs(tokens).items():
            path = Path(tmp) / "op.tflite"
            path.write_bytes(data)
            model = GpuModel(path)
            x = np.random.default_rng(1).standard_normal(model.input_shape).astype(np.float32)
            busy = 0.0
            for _ in range(repeats):
                model(x)
                busy += model.last_run["queue_s"]
            rows.append({"op": name, "gmac": round(macs * repeats / 1e9, 2), "queue_s": round(busy, 2),
                         "gmac_per_s": round(macs * repeats / 1e9 / max(busy, 1e-9), 2),
                         "fully_accelerated": model.fully_accelerated})
    return rows


def measure(aspect: str, photos: tuple[str, ...], use_perf: bool, ops: bool = False) -> dict:
    """The child: one fresh process, one setting (its environment)."""
    import numpy as np

    from da3_litert_farm.checks.agreement import compare
    from da3_litert_farm.config.params import load_params
    from da3_litert_farm.gpu.gpu_runtime import GpuModel, probe
    from da3_litert_farm.model.photo_input import load_photo_array

    target = load_params(checkpoint_files=False).cell(aspect)
    model_file = paths.fp16_model(aspect)
    with np.load(paths.depth_maps(aspect)) as maps:
        official = {p: maps[f"{p}.official"] for p in photos}
    inputs = {p: load_photo_array(p, target.height, target.width) for p in photos}
    record = {"aspect": aspect, "shape": [target.height, target.width], "sha256": fileio.sha256_file(model_file)}
    with Phase() as setup:
        adapter, problem = probe()
    record["setup"] = setup.record(adapter=str(adapter), problem=problem)
    with Phase() as load:
        model = GpuModel(model_file)
    record["compile"] = load.record(fully_accelerated=model.fully_accelerated, precision=model.precision)
    record["inferences"] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, photo in enumerate(photos):
            profiler = perf_start(os.getpid(), Path(tmp) / "perf.data") if use_perf and i == 1 else None
            with Phase() as run:
                depth = model(inputs[photo])
            figures = compare(depth, official[photo])
            record["inferences"].append(run.record(
                photo=photo, **{k: round(v, 2) for k, v in model.last_run.items()},
                one_minus_r=1 - figures["pearson"], mean_rel_error=figures["mean_rel_error"],
                cpu_share_by_library=perf_shares(profiler, Path(tmp) / "perf.data")))
    lint = json.loads(paths.lint_report(aspect).read_text())
    later = record["inferences"][1:] or record["inferences"]
    record["graph"] = {"gmac": round(lint["macs"] / 1e9, 2), "gmac_per_s": round(
        lint["macs"] / 1e9 / (sum(x["queue_s"] for x in later) / len(later)), 2)}
    if ops:
        from da3_litert_farm.core.models import DEFAULT_PRESET, PRESETS
        from da3_litert_farm.core.tensor_plan import plan_tensors

        record["ops"] = measure_ops(plan_tensors(PRESETS[DEFAULT_PRESET], target.height, target.width, 1 << 40).tokens)
    return record


def run_setting(setting: str, aspect: str, photos: int, use_perf: bool, ops: bool = False) -> dict:
    """Run `measure` in a fresh process with the setting's environment variables."""
    name, _, assignments = setting.partition(":")
    env = dict(os.environ)
    variables = dict(a.split("=", 1) for a in assignments.split(",") if a)
    env.update(variables)
    cmd = [sys.executable, "-m", "da3_litert_farm.dev.bench_gpu", aspect, "--child", "--photos", str(photos),
           *(["--perf"] if use_perf else []), *(["--ops"] if ops else [])]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_gpu {name}: the measuring process failed:\n{proc.stderr[-3000:]}")
    return {"setting": name, "environment": variables, **json.loads(proc.stdout.splitlines()[-1])}


def summary_rows(results: list[dict]) -> list[dict]:
    rows = []
    for r in results:
        runs = r["inferences"]
        later = runs[1:] or runs
        rows.append({
            "setting": r["setting"],
            "set-up s": r["setup"]["seconds"],
            "compile s": r["compile"]["seconds"],
            "precision": r["compile"]["precision"],
            "first inference s": runs[0]["seconds"],
            "later inference s": round(sum(x["seconds"] for x in later) / len(later), 2),
            "read-back s": max(x["read_s"] for x in runs),
            "graph GMAC/s": r["graph"]["gmac_per_s"],
            **{f"{op['op'].split(' (')[-1].rstrip(')')} GMAC/s": op["gmac_per_s"] for op in r.get("ops", [])},
            "core busy (later)": " / ".join(f"{c:.2f}" for c in later[-1]["core_busy"]),
            "1 - r (worst)": max(x["one_minus_r"] for x in runs),
            "mean rel (worst)": max(x["mean_rel_error"] for x in runs),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.dev.bench_gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("aspect", metavar="cell", help="a cell of params.yaml's matrix, MODEL-TIER-ASPECT")
    parser.add_argument("--photos", type=int, default=3, help="how many validation photos to run (default 3)")
    parser.add_argument("--perf", action="store_true", help="sample the second inference with perf")
    parser.add_argument("--ops", action="store_true", help="also time one-op graphs (MLP matmul, attention scores)")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME:VAR=VALUE,...",
                        help="an environment to measure (repeatable); default: the environment as it is")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--record", metavar="NAME", help="also write the summary to docs/figures/NAME.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from da3_litert_farm.config.params import load_params

    photos = load_params(checkpoint_files=False).validation.photos[: args.photos]
    if args.child:
        print(json.dumps(measure(args.aspect, photos, args.perf, args.ops)))
        return 0
    results = [run_setting(s, args.aspect, args.photos, args.perf, args.ops) for s in args.setting or [DEFAULT_SETTING]]
    for r in results:
        print(f"{r['setting']} {r['environment'] or ''}: adapter {r['setup']['adapter']}")
        print(f"  set-up {r['setup']['seconds']:.2f} s, compile {r['compile']['seconds']:.2f} s "
              f"(fully accelerated: {r['compile']['fully_accelerated']}, computes in {r['compile']['precision']})")
        for x in r["inferences"]:
            print(f"  {x['photo']}: {x['seconds']:.2f} s = submit {x['submit_s']:.2f} + queue {x['queue_s']:.2f} "
                  f"+ idle check {x['idle_wait_s']:.2f} + read {x['read_s']:.2f}; cores busy {x['core_busy']}; "
                  f"1 - r {x['one_minus_r']:.3e}, "
                  f"mean rel {x['mean_rel_error']:.3e}"
                  + (f"; CPU time by library {x['cpu_share_by_library']}" if x["cpu_share_by_library"] else ""))
        print(f"  whole graph: {r['graph']['gmac']} GMAC at {r['graph']['gmac_per_s']} GMAC/s (later inferences' queue)")
        for op in r.get("ops", []):
            print(f"  one op, {op['op']}: {op['gmac']} GMAC in {op['queue_s']} s of queue = {op['gmac_per_s']} GMAC/s")
    if args.json:
        fileio.write_json(args.json, results)
    if args.record:
        from da3_litert_farm.dev import figures

        weights = figures.weights_name(json.loads(paths.provenance(split_cell(args.aspect)[0]).read_text()))
        path = figures.record(args.record, summary_rows(results),
                              figures.command_line("da3_litert_farm.dev.bench_gpu", argv), weights=weights)
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
