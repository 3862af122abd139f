"""What `make farm` runs: `dvc repro` (dvc.lock written atomically: ops.atomic_dvc), then a summary a person can
act on, in place of DVC's closing "To track the changes with git, run: git add <every path>" hint.

    python -m da3_litert_farm.ops.farm_lock python -m da3_litert_farm.ops.farm_repro [DVC REPRO ARGS]

The summary says what ran and what the run-cache restored, each cell's gates (artifacts/catalog.json) and times
(the stages' own records: core.pipeline.stage_seconds), the report, and the next step of README.md's Publish.
ops.build (make farm JOBS=N) ends with the same summary.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

from da3_litert_farm.core import paths
from da3_litert_farm.core.pipeline import stage_seconds

# README.md's Publish, after `make farm` (tests/test_farm_repro.py checks the README still says so).
COMMIT = "git add params.yaml dvc.lock artifacts && git commit"
NEXT = ("make keys", "make publish")


def _stages(names: list[str]) -> str:
    """`params, export@small-896-9x16, gpu x4`: a stage run once by its name, one run for many cells by a count."""
    kinds = Counter(name.split("@")[0] for name in names)
    return ", ".join(next(n for n in names if n.split("@")[0] == kind) if count == 1 else f"{kind} x{count}"
                     for kind, count in kinds.items())


def _gates(m: dict) -> str:
    cpu, gpu, npu = m["fidelity"], m["gpu"], m.get("npu") or {}
    said = [f"CPU 1-r {1 - cpu['pearson_min']:.1e} (gate {1 - cpu['gate_min_pearson']:.1e})"]
    said.append(f"GPU 1-r {1 - gpu['pearson_min']:.1e} (gate {1 - gpu['gate_min_pearson']:.1e}), "
                f"mode {gpu['recommended_mode']['mode']}" if gpu["checked"] else "GPU check skipped")
    if npu.get("compiled"):
        said.append(f"NPU {', '.join(npu['targets'])}")
    return "; ".join(said)


def _times(cell: str, root: Path) -> str:
    seconds = {stage: s for stage, s in stage_seconds(cell, root).items() if s is not None}
    if not seconds:
        return "no times recorded"
    return f"{sum(seconds.values()):.0f} s (" + ", ".join(f"{stage} {s:.0f}" for stage, s in seconds.items()) + ")"


def summary(seen: dict[str, list[str]], ok: bool, seconds: float, root: Path = Path()) -> list[str]:
    """The lines `make farm` ends with; `seen`: the stages that ran, were restored and failed (ops.dvc_adapter's
    recording), `ok`: whether dvc repro succeeded."""
    ran, restored, failed = seen["ran"], seen["restored"], seen.get("failed", [])
    built = (f"ran {len(ran)} stage{'s' * (len(ran) != 1)}" + (f" ({_stages(ran)})" if ran else "")
             + f", restored {len(restored)} from the run-cache" + (f" ({_stages(restored)})" if restored else ""))
    if not ok:
        logs = [str(paths.native_log(s)) for s in failed if (root / paths.native_log(s)).is_file()]
        where = f" at {', '.join(failed)}" if failed else ""
        return [f"farm: FAILED in {seconds:.0f} s{where} (DVC's error is above); before it {built}",
                *([f"farm: native libraries' output of each stage: {paths.NATIVE_LOGS}/" +
                   (f" (the failed stage's: {', '.join(logs)})" if logs else "")]
                  if (root / paths.NATIVE_LOGS).is_dir() else []),
                "farm: what was built stays in the run-cache: after a fix, make farm runs only what failed and "
                "what follows it (docs/pipeline-and-run-cache.md, When a build fails)"]
    lines = [f"farm: done in {seconds:.0f} s: {built}, the rest were up to date"]
    try:
        catalog = json.loads((root / paths.CATALOG).read_text())
    except (OSError, ValueError):
        return lines + [f"farm: no {paths.CATALOG} (dvc repro of a part of the pipeline?)"]
    for m in catalog["models"]:
        lines.append(f"farm: {m['cell']}: passed: {_gates(m)}; {_times(m['cell'], root)}")
    lines.append(f"farm: report: {paths.REPORT_PAGE}")
    lines.append(f"farm: next (README.md, Publish): {COMMIT} -m \"Catalog {catalog['version']}\", "
                 f"then {NEXT[0]} (once per publisher) and {NEXT[1]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    from dvc.cli import main as dvc_main

    from da3_litert_farm.ops import dvc_adapter
    from da3_litert_farm.ops.atomic_dvc import install

    install()
    started = time.time()
    with dvc_adapter.recording() as seen:
        status = dvc_main(["repro", *(sys.argv[1:] if argv is None else argv)])
    print("\n" + "\n".join(summary(seen, status == 0, time.time() - started)), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
