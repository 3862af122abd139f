"""The parallel build's three programs (ops.build coordinator, ops.build_worker on Dask workers,
ops.dvc_repro children) together, on a pipeline with the farm's stage names whose commands only
copy text: no model, no GPU, seconds instead of tests/test_build.py's minutes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from da3_litert_farm.core.git import git
from da3_litert_farm.core.pipeline import CONVERT_STAGES, FINAL_STAGES, GPU_STAGE, SHARED_STAGES
from da3_litert_farm.ops.dvc_command import dvc, dvc_env

REPO = Path(__file__).resolve().parents[1]
ASPECTS = {"a": {"ratio": "1:1", "long_side": 112}, "b": {"ratio": "3:4", "long_side": 112}}


def copying_farm(root: Path) -> Path:
    """A git + DVC repository: the real params.yaml with two aspects, and each stage of dvc.yaml a copy."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["aspects"] = ASPECTS
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stages = {"params": {"cmd": "mkdir -p out && cp params.yaml out/params", "deps": ["params.yaml"],
                         "outs": ["out/params"]},
              "checkpoint": {"cmd": "cp out/params out/checkpoint", "deps": ["out/params"], "outs": ["out/checkpoint"]}}
    previous = "out/checkpoint"
    for stage in (*CONVERT_STAGES, GPU_STAGE):
        stages[stage] = {"foreach": "${aspects}", "do": {"cmd": f"cp {previous} out/${{key}}.{stage}",
                                                          "deps": [previous], "outs": [f"out/${{key}}.{stage}"]}}
        previous = f"out/${{key}}.{stage}"
    for stage in FINAL_STAGES:
        stages[stage] = {"cmd": f"cat out/a.gpu out/b.gpu > out/{stage}", "deps": ["out/a.gpu", "out/b.gpu"],
                         "outs": [f"out/{stage}"]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    git("init", "-q", cwd=root)
    dvc("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "copying farm", cwd=root)
    return root


def test_workers_build_each_aspect_and_the_final_repro_restores_them(tmp_path):
    farm = copying_farm(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.ops.build", "--jobs", "2"], cwd=farm,
                          env={**dvc_env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    for aspect in ASPECTS:
        chain = ", ".join(f"{stage}@{aspect}" for stage in (*CONVERT_STAGES, GPU_STAGE))
        assert re.search(rf"^build: {aspect} on \S+ \(pid \d+\): ran {chain};", output, re.M), output
    # Here, nothing per aspect ran again: 2 x 5 stages came from the workers' run-cache entries.
    assert f"restored 10 stages from the run-cache and ran {', '.join(FINAL_STAGES)};" in output
    assert (farm / "out/report").read_text() == (farm / "out/checkpoint").read_text() * 2
    assert set(yaml.safe_load((farm / "dvc.lock").read_text())["stages"]) == \
        {*SHARED_STAGES, *(f"{s}@{a}" for s in (*CONVERT_STAGES, GPU_STAGE) for a in ASPECTS), *FINAL_STAGES}
    assert len(git("worktree", "list", cwd=farm).splitlines()) == 1  # the workers' worktrees are gone
