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
ASPECTS = {"a": {"ratio": "1:1"}, "b": {"ratio": "3:4"}}
CELLS = ["small-112-a", "small-112-b"]  # the real params.yaml's model at tier 112


def copying_farm(root: Path) -> Path:
    """A git + DVC repository: the real params.yaml with two aspects at one tier, and each stage of dvc.yaml a copy
    (the per-cell stages over the same matrix)."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["aspects"], params["tiers"] = ASPECTS, [112]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stages = {"params": {"cmd": "mkdir -p out && cp params.yaml out/params", "deps": ["params.yaml"],
                         "outs": ["out/params"]},
              "checkpoint": {"cmd": "cp out/params out/checkpoint", "deps": ["out/params"], "outs": ["out/checkpoint"]}}
    previous = "out/checkpoint"
    cell = "${item.model}-${item.tier}-${item.aspect}"
    for stage in (*CONVERT_STAGES, GPU_STAGE):
        stages[stage] = {"matrix": {"model": "${models}", "tier": "${tiers}", "aspect": "${aspects}"},
                         "cmd": f"cp {previous} out/{cell}.{stage}", "deps": [previous], "outs": [f"out/{cell}.{stage}"]}
        previous = f"out/{cell}.{stage}"
    for stage in FINAL_STAGES:
        gpu = [f"out/{c}.gpu" for c in CELLS]
        stages[stage] = {"cmd": f"cat {' '.join(gpu)} > out/{stage}", "deps": gpu, "outs": [f"out/{stage}"]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    git("init", "-q", cwd=root)
    dvc("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "copying farm", cwd=root)
    return root


def test_workers_build_each_cell_and_the_final_repro_restores_them(tmp_path):
    farm = copying_farm(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.ops.build", "--jobs", "2"], cwd=farm,
                          env={**dvc_env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    for cell in CELLS:
        chain = ", ".join(f"{stage}@{cell}" for stage in (*CONVERT_STAGES, GPU_STAGE))
        assert re.search(rf"^build: {cell} on \S+ \(pid \d+\): ran {chain};", output, re.M), output
    # Here, nothing per cell ran again: 2 x 6 stages came from the workers' run-cache entries.
    assert f"restored 12 stages from the run-cache and ran {', '.join(FINAL_STAGES)};" in output
    assert (farm / "out/report").read_text() == (farm / "out/checkpoint").read_text() * 2
    assert set(yaml.safe_load((farm / "dvc.lock").read_text())["stages"]) == \
        {*SHARED_STAGES, *(f"{s}@{c}" for s in (*CONVERT_STAGES, GPU_STAGE) for c in CELLS), *FINAL_STAGES}
    assert len(git("worktree", "list", cwd=farm).splitlines()) == 1  # the workers' worktrees are gone
