"""core/pipeline.py names dvc.yaml's stages; the parallel build learns from DVC's Python API which
stages ran and which came from the run-cache (checked on a tiny DVC repository, no model)."""

import json
from pathlib import Path

import pytest
import yaml

from da3_litert_farm.core import pipeline
from da3_litert_farm.core.git import git
from da3_litert_farm.ops.dvc_command import BuildError, dvc
from da3_litert_farm.ops.dvc_repro import repro

REPO = Path(__file__).resolve().parents[1]


def dvc_yaml() -> dict:
    return yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


def test_the_stage_names_are_dvc_yamls():
    stages = dvc_yaml()
    assert tuple(stages) == pipeline.STAGES  # file order
    per_cell = {"model": "${models}", "tier": "${tiers}", "aspect": "${aspects}"}
    assert tuple(name for name, s in stages.items() if s.get("matrix") == per_cell) == pipeline.PER_CELL_STAGES
    assert tuple(name for name, s in stages.items() if s.get("matrix") != per_cell) == \
        pipeline.SHARED_STAGES + pipeline.FINAL_STAGES
    # The shared stages come before every per-cell stage, the final ones after.
    assert pipeline.STAGES == pipeline.SHARED_STAGES + pipeline.PER_CELL_STAGES + pipeline.FINAL_STAGES


def test_the_gpu_stage_is_the_per_cell_stage_on_the_gpu_runtime_and_nothing_per_cell_needs_it():
    per_aspect = {name: s for name, s in dvc_yaml().items() if name in pipeline.PER_CELL_STAGES}
    on_gpu = [name for name, s in per_aspect.items() if "da3_litert_farm/gpu/gpu_runtime.py" in s["deps"]]
    assert on_gpu == [pipeline.GPU_STAGE]
    gpu_outs = set(per_aspect[pipeline.GPU_STAGE]["outs"])
    assert not any(gpu_outs & set(s["deps"]) for s in per_aspect.values())  # so the build may run it last
    assert pipeline.CONVERT_STAGES == ("patch", "export", "quantize", "validate", "npu")


def test_each_stage_seconds_come_from_that_stages_own_record(tmp_path):
    outs = {name: s["outs"] for name, s in dvc_yaml().items() if name in pipeline.PER_CELL_STAGES}
    recorded = {"patch": ("patch.json", 11.0), "export": ("export.json", 22.0), "quantize": ("quantize.json", 33.0),
                "validate": ("metrics.json", 44.0), "npu": ("npu.json", 50.0), "gpu": ("gpu.json", 55.0)}
    for stage, (name, seconds) in recorded.items():
        tree = "npu" if stage == "npu" else "models"  # the NPU files have a tree of their own
        out = f"artifacts/{tree}/${{item.model}}/${{item.tier}}/${{item.aspect}}"
        assert (out if stage == "npu" else f"{out}/{name}") in outs[stage]  # its output
        (tmp_path / f"artifacts/{tree}/m/112/a").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"artifacts/{tree}/m/112/a" / name).write_text(json.dumps({"cell": "m-112-a", "seconds": seconds}))
    assert pipeline.stage_seconds("m-112-a", tmp_path) == {stage: s for stage, (_, s) in recorded.items()}

    (tmp_path / "artifacts/models/m/112/a/export.json").unlink()  # not recorded: the report shows "-"
    (tmp_path / "artifacts/models/m/112/a/gpu.json").write_text(json.dumps({"checked": False}))
    assert pipeline.stage_seconds("m-112-a", tmp_path) == {"patch": 11.0, "export": None, "quantize": 33.0,
                                                           "validate": 44.0, "npu": 50.0, "gpu": None}


def tiny_dvc_repo(root: Path) -> Path:
    """A git + DVC repository with one stage that copies a file: `s`, a -> b."""
    git("init", "-q", cwd=root)
    dvc("init", "-q", cwd=root)
    (root / "a").write_text("hello\n")
    dvc("stage", "add", "-q", "-n", "s", "-d", "a", "-o", "b", "cp a b", cwd=root)
    return root


def test_repro_tells_a_run_from_a_restore_out_of_the_run_cache(tmp_path):
    repo = tiny_dvc_repo(tmp_path)
    first = repro(cwd=repo)
    assert (first["ran"], first["restored"]) == (["s"], [])
    assert (repo / "b").read_text() == "hello\n"

    again = repro(cwd=repo)  # nothing changed
    assert (again["ran"], again["restored"]) == ([], [])

    # Output and lock entry gone: only the run-cache knows `cp a b` made b from this a.
    (repo / "b").unlink()
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    del lock["stages"]["s"]
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock))
    restored = repro("s", cwd=repo, single_item=True)
    assert (restored["ran"], restored["restored"]) == ([], ["s"])
    assert (repo / "b").read_text() == "hello\n"
    assert "s" in yaml.safe_load((repo / "dvc.lock").read_text())["stages"]

    (repo / "a").write_text("changed\n")  # a new input: nothing cached for it, the command runs
    changed = repro("s", cwd=repo, single_item=True)
    assert (changed["ran"], changed["restored"]) == (["s"], [])
    assert (repo / "b").read_text() == "changed\n"


def test_a_killed_stage_fails_repro_with_dvcs_reason(tmp_path):
    repo = tiny_dvc_repo(tmp_path)
    dvc("stage", "add", "-q", "-n", "dies", "-d", "b", "-o", "c", "kill -9 $$", cwd=repo)
    repro("s", cwd=repo, single_item=True)
    # -9 where DVC's shell execs the command, 137 (128 + SIGKILL) where the shell forks and reports it.
    with pytest.raises(BuildError, match=r"(?s)dvc repro --single-item dies` failed \(exit 1\):.*"
                                         r"ERROR: failed to reproduce 'dies': failed to run: kill -9 \$\$, "
                                         r"exited with (-9|137)"):
        repro("dies", cwd=repo, single_item=True)
    assert not (repo / "c").exists()
