"""What the NPU stage adds to `make farm`: the shipped params.yaml built from nothing without NPU files, then with
them, on one machine (nothing asserted).

    python -m da3_litert_farm.dev.bench_farm --record bench-farm

A fresh copy of the repository's files builds the shipped matrix (models, tiers, aspects, validation as params.yaml
has them) from stress weights of the shipped preset, since a test machine cannot reach the Hub: the same shapes, ops
and stages, so the same work. First `dvc repro` with npu.targets empty (the farm before NPUs: its npu@CELL stages
write an empty record in about a second), then the shipped npu section restored and `dvc repro` again, which runs
only the npu stages and the catalog and report after them. So the farm with NPU files costs the two together. Run it
alone: two heavy processes on few cores distort each other's times. --record NAME writes docs/figures/NAME.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

import yaml

from da3_litert_farm.core import paths
from da3_litert_farm.core.git import git
from da3_litert_farm.core.pipeline import stage_seconds
from da3_litert_farm.dev import figures
from da3_litert_farm.dev.bench_build import timed
from da3_litert_farm.dev.bench_install import repo_copy


def new_repo(root: Path) -> tuple[Path, dict]:
    """The repository's files with the shipped params, but stress weights of each model's preset: (repo, params)."""
    repo = repo_copy(root)
    doc = yaml.safe_load((repo / "params.yaml").read_text())
    doc["models"] = {name: {"source": "random", "preset": m.get("preset", "da3-small"), "seed": 0}
                     for name, m in doc["models"].items()}
    git("init", "-q", cwd=repo)
    return repo, doc


def write_params(repo: Path, doc: dict) -> None:
    (repo / "params.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.dev.bench_farm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", metavar="NAME", help="also write the figures to docs/figures/NAME.json")
    args = parser.parse_args(argv)
    python = [sys.executable, "-m"]
    measured = figures.measured_on(figures.command_line("da3_litert_farm.dev.bench_farm", argv),
                                   "stress weights (seed 0) of the shipped preset, at the shipped params")  # at the start
    with tempfile.TemporaryDirectory(prefix="bench-farm-") as tmp:
        repo, shipped = new_repo(Path(tmp))
        without = copy.deepcopy(shipped)
        without["npu"].update(targets=[], simulate=[])
        write_params(repo, without)
        before_s, _ = timed([*python, "dvc", "repro"], repo)
        cells = [m["cell"] for m in json.loads((repo / "artifacts/catalog.json").read_text())["models"]]
        print(f"make farm without NPU files ({len(cells)} cells): {before_s / 60:.1f} min", flush=True)
        write_params(repo, shipped)
        npu_s, _ = timed([*python, "dvc", "repro"], repo)
        print(f"then the npu section of params.yaml: {npu_s / 60:.1f} min more, {(before_s + npu_s) / 60:.1f} min "
              f"in all ({npu_s / before_s:.0%} of the farm without NPU files)")
        rows = [{"quantity": f"make farm without NPU files, {len(cells)} cells", "value": before_s / 60, "unit": "min"},
                {"quantity": "the NPU stages then added (and catalog, report)", "value": npu_s / 60, "unit": "min"},
                {"quantity": "make farm with NPU files", "value": (before_s + npu_s) / 60, "unit": "min"},
                {"quantity": "growth", "value": 100 * npu_s / before_s, "unit": "%"}]
        for cell in cells:
            seconds = stage_seconds(cell, repo)
            record = json.loads((repo / paths.npu_record(cell)).read_text())
            sims = [t["simulator"] for t in record["targets"].values() if "simulator" in t]
            for stage, s in seconds.items():
                rows.append({"quantity": f"{cell}: {stage}", "value": s, "unit": "s"})
            print(f"{cell}: " + ", ".join(f"{stage} {s:.0f} s" for stage, s in seconds.items() if s is not None)
                  + "".join(f"; simulated at {s['shape']}{' (proxy)' if s['proxy'] else ''} in {s['seconds']:.0f} s"
                            for s in sims))
    if args.record:
        path = figures.record(args.record, rows, measured["command"], measured=measured)
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
