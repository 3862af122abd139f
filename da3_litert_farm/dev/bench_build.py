"""Benchmark how the farm builds: sequential `dvc repro` against the parallel build, the
run-cache, and a fresh clone; then estimate a large farm from the measured per-aspect cost.

    python -m da3_litert_farm.dev.bench_build [--long-side 224] [--jobs 2] [--machines 8 --aspects 24] [--record NAME]

Each build starts from nothing in a fresh copy of the repository's files (stress weights,
the three default ratios at --long-side), with its own DVC cache. Run it alone: two heavy
processes on few cores distort each other's times. --record NAME also writes the figures to
docs/figures/NAME.json (see da3_litert_farm.dev.figures).
"""

from __future__ import annotations

import argparse
import math
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from da3_litert_farm.dev import figures
from da3_litert_farm.dev.bench_install import repo_copy
from da3_litert_farm.core import peak_memory
from da3_litert_farm.core.pipeline import stage_seconds
from da3_litert_farm.core.git import git
from da3_litert_farm.ops.dvc_command import dvc, dvc_env
from da3_litert_farm.ops.dvc_repro import repro

RATIOS = {"9x16": "9:16", "3x4": "3:4", "16x9": "16:9"}


def new_repo(root: Path, long_side: int) -> Path:
    repo = repo_copy(root)
    doc = yaml.safe_load((repo / "params.yaml").read_text())
    doc["models"] = {"small": {"source": "random", "preset": "da3-small", "seed": 0}}
    doc["tiers"] = [long_side]
    doc["aspects"] = {name: {"ratio": ratio} for name, ratio in RATIOS.items()}
    (repo / "params.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("-c", "user.email=bench@farm", "-c", "user.name=bench", "commit", "-qm", "bench", cwd=repo)
    return repo


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    started = time.time()
    proc = subprocess.run(cmd, cwd=cwd, env=dvc_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_build: {' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return time.time() - started, proc.stdout + proc.stderr


def timed_repro(repo: Path, pull: bool = False) -> tuple[float, dict]:
    """`dvc repro` through DVC's API (ops.dvc_repro.repro): (seconds, the stages it ran and restored)."""
    started = time.time()
    outcome = repro(cwd=repo, pull=pull)
    return time.time() - started, outcome


def per_aspect(stages: list[str]) -> list[str]:
    return [s for s in stages if "@" in s]


def peak_child_rss_mb() -> float:
    """Largest resident set of any process this benchmark has waited for so far."""
    return peak_memory.peak_rss_mib(resource.RUSAGE_CHILDREN)


def figure_rows(m: dict[str, float], jobs: int, machines: int, aspects: int) -> list[dict]:
    """What main prints, one row per measured quantity."""
    return [{"quantity": q, "value": v, "unit": u} for q, v, u in (
        ("3 aspects from nothing, sequential `dvc repro`", m["sequential_s"], "s"),
        ("largest process in it", m["sequential_rss_mb"], "MB"),
        (f"3 aspects from nothing, parallel build --jobs {jobs}", m["parallel_s"], "s"),
        ("remove 3x4, `dvc repro`", m["removed_s"], "s"),
        ("add 3x4 back, `dvc repro` (run-cache)", m["readded_s"], "s"),
        ("`dvc push --run-cache`", m["push_s"], "s"),
        ("fresh clone, `dvc repro --pull`", m["pull_s"], "s"),
        ("per aspect, convert (slowest of 3)", m["convert_s"], "s"),
        ("per aspect, GPU check (slowest of 3)", m["gpu_s"], "s"),
        (f"estimate, {aspects} aspects on {machines} machines", m["estimate_s"] / 60, "min"),
        (f"estimate, {aspects} aspects on one machine", m["one_machine_s"] / 60, "min"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.dev.bench_build", description=__doc__.split("\n\n")[0])
    parser.add_argument("--long-side", type=int, default=224)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--machines", type=int, default=8)
    parser.add_argument("--aspects", type=int, default=24)
    parser.add_argument("--record", metavar="NAME", help="also write the figures to docs/figures/NAME.json")
    args = parser.parse_args(argv)
    python = [sys.executable, "-m"]
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        tmp = Path(tmp)
        seq = new_repo(tmp / "sequential", args.long_side)
        seq_s, _ = timed([*python, "dvc", "repro"], seq)
        seq_rss = peak_child_rss_mb()
        print(f"3 aspects from nothing, sequential `dvc repro`: {seq_s:.1f} s; largest process {seq_rss:.0f} MB")

        par = new_repo(tmp / "parallel", args.long_side)
        par_s, out = timed([*python, "da3_litert_farm.ops.build", "--jobs", str(args.jobs)], par)
        print(f"3 aspects from nothing, parallel build --jobs {args.jobs}: {par_s:.1f} s "
              f"({seq_s / par_s:.2f}x the sequential speed)")
        for line in re.findall(r"^build: \w+ on .*$", out, re.M):
            print(f"  {line[len('build: '):]}")

        doc_path = seq / "params.yaml"
        full = doc_path.read_text()
        doc = yaml.safe_load(full)
        del doc["aspects"]["3x4"]
        doc_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        removed_s, _ = timed([*python, "dvc", "repro"], seq)
        doc_path.write_text(full)
        readd_s, readded = timed_repro(seq)
        print(f"remove 3x4, dvc repro: {removed_s:.1f} s; add it back, dvc repro: {readd_s:.1f} s "
              f"(converted: {', '.join(per_aspect(readded['ran'])) or 'nothing'}; "
              f"{len(readded['restored'])} stages from the run-cache)")

        remote = tmp / "remote"
        dvc("remote", "add", "-d", "-f", "storage", str(remote), cwd=seq)
        git("add", "-A", cwd=seq)
        git("-c", "user.email=bench@farm", "-c", "user.name=bench", "commit", "-qm", "built", cwd=seq)
        push_s, _ = timed([*python, "dvc", "push", "--run-cache"], seq)
        clone = tmp / "clone"
        git("clone", "-q", str(seq), str(clone), cwd=tmp)
        (clone / "dvc.lock").unlink()  # nothing but the run-cache to go by
        pull_s, pulled = timed_repro(clone, pull=True)
        print(f"fresh clone: `dvc push --run-cache` there {push_s:.1f} s; `dvc repro --pull` here {pull_s:.1f} s, "
              f"converted: {', '.join(per_aspect(pulled['ran'])) or 'nothing'}")

        seconds = {a: stage_seconds(a, seq) for a in RATIOS}
        convert = max(sum(v for k, v in s.items() if k != "gpu") for s in seconds.values())
        gpu = max(s["gpu"] for s in seconds.values())
        rounds = math.ceil(args.aspects / args.machines)
        estimate = rounds * (convert + gpu) + pull_s * args.aspects / 3
        print(f"per aspect (sequential run, slowest of 3): convert {convert:.1f} s, GPU check {gpu:.1f} s")
        print(f"estimate, {args.aspects} aspects on {args.machines} machines like this one (one worker each; "
              f"the GPU check has the machine alone): {rounds} aspects per machine x {convert + gpu:.0f} s "
              f"+ restoring {args.aspects} aspects here ({pull_s * args.aspects / 3:.0f} s) = "
              f"{estimate / 60:.1f} min, against {args.aspects * (convert + gpu) / 60:.1f} min on one machine")
    if args.record:
        measured = {"sequential_s": seq_s, "sequential_rss_mb": seq_rss, "parallel_s": par_s,
                    "removed_s": removed_s, "readded_s": readd_s, "push_s": push_s, "pull_s": pull_s,
                    "convert_s": convert, "gpu_s": gpu, "estimate_s": estimate,
                    "one_machine_s": args.aspects * (convert + gpu)}
        path = figures.record(args.record, figure_rows(measured, args.jobs, args.machines, args.aspects),
                              figures.command_line("da3_litert_farm.dev.bench_build", argv))
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
