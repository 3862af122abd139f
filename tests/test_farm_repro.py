"""What `make farm` ends with (da3_litert_farm.ops.farm_repro): what ran and was restored, each cell's gates and
times, the report and README's next step, in place of DVC's git-add hint. A fake catalog and stage records here;
a toy DVC pipeline for what DVC reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from da3_litert_farm.core import fileio, paths
from da3_litert_farm.ops import farm_repro
from tests.farm_repo import REPO

CELL = "small-112-9x16"


def _fake_build(root):
    """A catalog of one cell and its stages' records of their seconds."""
    entry = {"cell": CELL,
             "fidelity": {"pearson_min": 0.99998, "gate_min_pearson": 0.999},
             "gpu": {"checked": True, "pearson_min": 0.9997, "gate_min_pearson": 0.995,
                     "recommended_mode": {"mode": "fp16"}},
             "npu": {"compiled": True, "targets": {"SM8650": {}}}}
    fileio.write_json(root / paths.CATALOG, {"version": "0.2.0", "models": [entry]})
    for where, seconds in ((paths.export_report, 21.4), (paths.gpu_metrics, 48.0)):
        fileio.write_json(root / where(CELL), {"seconds": seconds})


def test_a_build_ends_with_what_ran_the_gates_the_times_the_report_and_the_next_step(tmp_path):
    _fake_build(tmp_path)
    seen = {"ran": ["params", f"export@{CELL}", f"gpu@{CELL}", "gpu@small-112-16x9"], "restored": [f"patch@{CELL}"],
            "failed": []}
    lines = farm_repro.summary(seen, True, 75.2, tmp_path)
    assert lines == [
        f"farm: done in 75 s: ran 4 stages (params, export@{CELL}, gpu x2), restored 1 from the run-cache "
        f"(patch@{CELL}), the rest were up to date",
        f"farm: {CELL}: passed: CPU 1-r 2.0e-05 (gate 1.0e-03); GPU 1-r 3.0e-04 (gate 5.0e-03), mode fp16; "
        "NPU SM8650; 69 s (export 21, gpu 48)",
        "farm: report: artifacts/report/index.html",
        'farm: next (README.md, Publish): git add params.yaml dvc.lock artifacts && git commit -m "Catalog 0.2.0", '
        "then make keys (once per publisher) and make publish"]


def test_a_failed_build_names_the_failed_stage_and_its_native_log(tmp_path):
    log = tmp_path / paths.native_log(f"gpu@{CELL}")
    log.parent.mkdir()
    log.write_text("INFO: [accelerator_registry.cc]\n")
    lines = farm_repro.summary({"ran": [], "restored": [], "failed": [f"gpu@{CELL}"]}, False, 9, tmp_path)
    assert lines[0] == (f"farm: FAILED in 9 s at gpu@{CELL} (DVC's error is above); before it ran 0 stages, "
                        "restored 0 from the run-cache")
    assert lines[1] == ("farm: native libraries' output of each stage: .farm-logs/ "
                        f"(the failed stage's: {log.relative_to(tmp_path)})")


def test_the_next_step_is_the_readmes():
    readme = (REPO / "README.md").read_text()
    publish = readme[readme.index("## Publish"):]
    assert farm_repro.COMMIT in publish and all(step in publish for step in farm_repro.NEXT)


def test_dvc_repro_through_farm_repro_records_each_stage_and_drops_dvcs_git_add_hint(tmp_path):
    """The toy pipeline's stage runs, then, its output removed and its lock entry dropped, comes back from the
    run-cache; a failing stage is named."""
    run = dict(cwd=tmp_path, check=True, capture_output=True, text=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "DVC_NO_ANALYTICS": "1"}
    subprocess.run(["git", "init", "-q"], **run)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], **run, env=env)
    (tmp_path / "in.txt").write_text("in\n")
    (tmp_path / "dvc.yaml").write_text("stages:\n  make:\n    cmd: cp in.txt made.txt\n    deps: [in.txt]\n"
                                       "    outs: [made.txt]\n")
    farm = [sys.executable, "-m", "da3_litert_farm.ops.farm_repro"]
    out = subprocess.run(farm, **run, env=env).stdout
    assert "To track the changes with git" not in out and "farm: done in " in out
    assert "ran 1 stage (make), restored 0 from the run-cache" in out, out
    (tmp_path / "made.txt").unlink()
    (tmp_path / "dvc.lock").unlink()
    out = subprocess.run(farm, **run, env=env).stdout
    assert "ran 0 stages, restored 1 from the run-cache (make)" in out, out
    (tmp_path / "dvc.yaml").write_text("stages:\n  fail:\n    cmd: exit 1\n    outs: [never.txt]\n")
    failed = subprocess.run(farm, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert failed.returncode != 0 and "farm: FAILED in " in failed.stdout and " at fail (" in failed.stdout, \
        failed.stdout + failed.stderr
