"""What `python -m stages.params` says a params.yaml will cost, and what it refuses (config.cost_plan)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import yaml

import stages.params
from da3_litert_farm.config import cost_model, cost_plan
from da3_litert_farm.config.cost_model import FIGURES, load
from da3_litert_farm.config.params import load_params, parse_params
from da3_litert_farm.core import host
from da3_litert_farm.core.pipeline import PER_CELL_STAGES

REPO = Path(__file__).resolve().parents[1]
GIB = 1 << 30
SHIPPED = yaml.safe_load((REPO / "params.yaml").read_text())


def machine(tmp_path: Path, memory: float = 64 * GIB, free: float = 1e12) -> cost_plan.Machine:
    return cost_plan.Machine(cpu="Test CPU, 2 cores", memory=int(memory), cache=tmp_path / ".dvc" / "cache",
                             links=False, workspace_free=int(free), cache_free=int(free), one_disk=True)


def fake_recordings(folder: Path) -> Path:
    """Recordings small enough to work out by hand (see test_the_shipped_params_cost_what_a_hand_computes)."""
    folder.mkdir()
    on = {"date": "2000-01-01", "cpu": "Fake CPU, 2 cores"}
    cells = [{"cell": "small-140-a", "H x W": "140 x 140", "MB": 50, "model": "da3-small", "GMAC": 2, "GPU s": 10,
              "export s": 60, "export peak RSS MiB": 1000},
             {"cell": "small-280-a", "H x W": "280 x 280", "MB": 50, "model": "da3-small", "GMAC": 20, "GPU s": 19,
              "export s": 60, "export peak RSS MiB": 1090},
             {"cell": "bundle small-140", "H x W": "all 1", "MB": 50, "x the largest file": 1.0}]
    (folder / "family-matrix.json").write_text(json.dumps({"measured_on": on, "figures": cells}))
    sizes = [{"quantity": "size FP32", "value": 100, "unit": "MB"},
             {"quantity": "size FP16", "value": 50, "unit": "MB"}]
    (folder / "bench.json").write_text(json.dumps({"measured_on": on, "figures": sizes}))
    npu = [{"shape": "896 x 504", "chip": "SM8650", "MB": 55, "compile s": 30}]
    (folder / "npu-896x504.json").write_text(json.dumps({"measured_on": on, "figures": npu}))
    return folder


def test_the_shipped_params_cost_what_a_hand_computes(tmp_path):
    # The fake family: da3-small at 140 x 140 (10 x 10 = 100 tokens) 2 GMAC and at 280 x 280 (400 tokens) 20 GMAC, so
    # a 100 + b 10^4 = 2 and a 400 + b 16 10^4 = 20: b = 1e-4, a = 0.01. The shipped cells hold 64 x 36 = 2304
    # tokens (9x16, 16x9): 23.04 + 530.8416 = 553.8816 GMAC, and 64 x 48 = 3072 (3x4, 4x3): 30.72 + 943.7184 =
    # 974.4384 GMAC. GPU s = 9 + 0.5 GMAC: 285.9408 and 496.2192 s per inference, 2 modes x 1 photo: 9.53136 and
    # 16.54064 min; the four cells 52.144 min. Peak RSS = 990 + 5 GMAC: 3759.408 and 5862.192 MiB. MB 50 flat,
    # FP32 = 2 x 50 = 100 (and the patched program as much), an NPU file 55 / 50 = 1.1 x 50 = 55 MB, 4 chips 220 MB:
    # a cell 100 + 100 + 50 + 220 = 470 MB, twice (workspace and cache) 940 MB; the checkpoint 100 and the bundle
    # 50 MB, twice: 300. All new (no dvc.lock): 4 x 940 + 300 = 4060 MB, 2030 in each place.
    params = load_params(REPO / "params.yaml")
    assert (len(params.validation.gpu_modes), len(params.validation.gpu_photos), len(params.npu.targets)) == (2, 1, 4)
    plan = cost_plan.plan(params, root=tmp_path, machine=machine(tmp_path), figures=fake_recordings(tmp_path / "f"))
    cells = plan.cells
    assert cells["small-896-9x16"].figures["GMAC"] == pytest.approx(553.8816)
    assert cells["small-896-3x4"].figures["GMAC"] == pytest.approx(974.4384)
    assert cells["small-896-9x16"].minutes["gpu"] == pytest.approx(9.53136)
    assert cells["small-896-4x3"].minutes["gpu"] == pytest.approx(16.54064)
    assert sum(c.minutes["gpu"] for c in cells.values()) == pytest.approx(52.144)
    assert sum(c.minutes["export"] for c in cells.values()) == pytest.approx(4)
    peak = plan.peak()
    assert peak.cell.name == "small-896-3x4" and peak.figures["export peak RSS MiB"] == pytest.approx(5862.192)
    assert cells["small-896-16x9"].figures["export peak RSS MiB"] == pytest.approx(3759.408)
    assert plan.footprint(cells["small-896-9x16"]) == pytest.approx(940e6)
    assert plan.new_bytes() == pytest.approx((2030e6, 2030e6))
    assert all(c.runs == PER_CELL_STAGES and not c.listed for c in cells.values())
    text = "\n".join(plan.lines())
    assert "family-matrix.json (2000-01-01, Fake CPU, 2 cores)" in text and "this one is Test CPU, 2 cores" in text
    assert "plan: disk: about 4.1 GB new, 2.0 GB in the workspace and 2.0 GB in the DVC cache" in text
    assert "plan: memory: the largest stage, export@small-896-3x4, about 5.7 GiB of this machine's 64.0 GiB" in text
    assert plan.refusal() is None


def family_params() -> dict:
    """The family of docs/benchmarks.md: small, base and metric at 896 and 518 in 9:16 and 16:9, one GPU mode, no
    NPU files, as it was recorded."""
    doc = copy.deepcopy(SHIPPED)
    doc["models"] = {m: {"source": "random", "preset": p} for m, p in
                     (("small", "da3-small"), ("base", "da3-base"), ("metric", "da3metric-large"))}
    doc["tiers"] = [896, 518]
    doc["aspects"] = {"9x16": {"ratio": "9:16"}, "16x9": {"ratio": "16:9"}}
    doc["validation"].update(gpu_modes=["fp16"], gpu_mode_gates={})
    doc["npu"].update(targets=[], simulate=[])
    return doc


def test_the_family_matrix_prints_a_line_per_cell_near_what_its_build_measured(tmp_path):
    params = parse_params(family_params(), base_dir=REPO)
    plan = cost_plan.plan(params, root=tmp_path, machine=machine(tmp_path))
    lines = plan.lines()
    assert [line.split()[0] for line in lines if line.split()[0] in params.cells] == list(params.cells)  # 12
    measured = {r["cell"]: r for r in json.loads((FIGURES / "family-matrix.json").read_text())["figures"]}
    for name, c in plan.cells.items():  # fitted to these very cells: GPU s alone differs by aspect, not modelled
        for column, within in (("GMAC", 0.01), ("MB", 0.01), ("export peak RSS MiB", 0.01), ("export s", 0.05),
                               ("GPU s", 0.25)):
            assert c.figures[column] == pytest.approx(measured[name][column], rel=within), (name, column)
    work, cache = plan.new_bytes()
    assert 40e9 < work + cache < 48e9  # such a family filled a 44 GB disk
    refused = cost_plan.plan(params, root=tmp_path, machine=machine(tmp_path, free=30e9)).refusal()
    assert "writes about 43.4 GB to the disk holding the workspace and the DVC cache (the largest cell, " \
           "metric-896-9x16, 6.6 GB), more than its 30.0 GB free" in refused


def test_a_plan_over_the_machines_memory_is_refused_naming_the_cell_the_figure_and_the_limit(tmp_path):
    plan = cost_plan.plan(load_params(REPO / "params.yaml"), root=tmp_path, figures=fake_recordings(tmp_path / "f"),
                          machine=machine(tmp_path, memory=4 * GIB))
    with pytest.raises(cost_plan.CostError) as refused:
        cost_plan.enforce(plan, env={})
    assert str(refused.value) == (
        "export@small-896-3x4 (da3-small at 896 x 672) needs about 5.7 GiB of memory (estimated from "
        "family-matrix.json (2000-01-01, Fake CPU, 2 cores)), more than this machine's 4.0 GiB: drop the tier or "
        "aspect of small-896-3x4, small-896-4x3 from params.yaml, or build on a larger machine. Set "
        "FARM_IGNORE_COST=1 to build anyway")  # 9x16 and 16x9 fit: 3759.408 MiB


def test_a_model_whose_every_export_is_over_the_memory_is_named_to_drop(tmp_path):
    params = parse_params(family_params(), base_dir=REPO)
    plan = cost_plan.plan(params, root=tmp_path, machine=machine(tmp_path, memory=7 * GIB))
    assert plan.refusal() == (
        f"export@metric-896-9x16 (da3metric-large at 896 x 504) needs about 7.6 GiB of memory (estimated from "
        f"{plan.model.source}), more than this machine's 7.0 GiB: drop model metric (da3metric-large) from "
        f"params.yaml, or build on a larger machine. Set FARM_IGNORE_COST=1 to build anyway")


def test_a_plan_over_the_free_disk_is_refused_and_the_override_lets_it_through(tmp_path):
    plan = cost_plan.plan(load_params(REPO / "params.yaml"), root=tmp_path, figures=fake_recordings(tmp_path / "f"),
                          machine=machine(tmp_path, free=4e9))  # 4.06 GB needed (see the hand computation above)
    with pytest.raises(cost_plan.CostError, match=r"writes about 4\.1 GB to the disk holding the workspace and the "
                       r"DVC cache \(the largest cell, small-896-9x16, 0\.9 GB\), more than its 4\.0 GB free: free "
                       r"disk \(`dvc gc --workspace`.*or drop a tier, preset or aspect from params\.yaml\. Set "
                       r"FARM_IGNORE_COST=1 to build anyway$"):
        cost_plan.enforce(plan, env={})
    cost_plan.enforce(plan, env={"FARM_IGNORE_COST": "1"})


def test_the_params_stage_refuses_before_any_work_unless_told_to_ignore_the_cost(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(cost_plan.IGNORE, raising=False)
    monkeypatch.setattr(host, "memory_bytes", lambda: 1 * GIB)  # the machine, not the plan: a 1 GiB box
    Path("params.yaml").write_text((REPO / "params.yaml").read_text())
    assert stages.params.main(["--write"]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("params: export@small-896-3x4 (da3-small at 896 x 672) needs about ")
    assert "this machine's 1.0 GiB" in err and "FARM_IGNORE_COST=1" in err and "small-896-9x16" in out
    assert os.listdir(".") == ["params.yaml"]  # nothing written
    monkeypatch.setenv(cost_plan.IGNORE, "1")
    assert stages.params.main(["--write"]) == 0
    assert Path("artifacts/params/cells/small-896-3x4.json").exists()


def test_a_stage_dvc_lock_records_with_todays_params_is_done_and_an_edit_reruns_what_follows(tmp_path):
    doc = copy.deepcopy(SHIPPED)
    doc["aspects"] = {"9x16": {"ratio": "9:16"}, "16x9": {"ratio": "16:9"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(doc))
    recorded = {s: {"aspects.9x16": {"ratio": "9:16"}} for s in PER_CELL_STAGES}  # as dvc.yaml lists them, in part
    recorded["gpu"]["validation.gpu_modes"] = ["fp16", "fp16_fp32_accum"]
    lock = {"schema": "2.0", "stages": {
        "checkpoint@small": {"params": {"params.yaml": {"models.small": doc["models"]["small"]}}},
        **{f"{s}@small-896-9x16": {"params": {"params.yaml": recorded[s]}} for s in PER_CELL_STAGES}}}
    # as DVC writes it: YAML 1.2, where an unquoted 9:16 is text (YAML 1.1 reads the integer 556)
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock).replace("'9:16'", "9:16"))
    params = parse_params(doc, base_dir=REPO)
    plan = cost_plan.plan(params, root=tmp_path, machine=machine(tmp_path))
    assert plan.cells["small-896-9x16"].runs == () and plan.cells["small-896-16x9"].runs == PER_CELL_STAGES
    assert "small-896-16x9" in "\n".join(plan.lines()) and "stages of 1 of 2 cells (1 new, 0 rerun" in \
        "\n".join(plan.lines())
    doc["validation"].update(gpu_modes=["fp16"], gpu_mode_gates={})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(doc))
    plan = cost_plan.plan(parse_params(doc, base_dir=REPO), root=tmp_path, machine=machine(tmp_path))
    rerun = plan.cells["small-896-9x16"]
    assert rerun.runs == ("gpu",) and rerun.listed == PER_CELL_STAGES
    assert "reruns gpu" in "\n".join(plan.lines())


def test_the_tests_tiny_farms_are_far_below_any_limit(tmp_path):
    doc = copy.deepcopy(SHIPPED)
    doc["tiers"] = [224, 112]
    doc["aspects"] = {"a": {"ratio": "16:9"}, "b": {"ratio": "9:16"}, "c": {"ratio": "1:1"}}
    doc["npu"].update(targets=["SM8650"], simulate=["SM8650"], simulate_tier=None)
    plan = cost_plan.plan(parse_params(doc, base_dir=REPO), root=tmp_path, machine=machine(tmp_path))
    assert plan.peak().figures["export peak RSS MiB"] < 2 * 1024
    assert sum(plan.new_bytes()) < 6e9  # the weights, not the tier, fill a small farm's disk
    assert all(c.minutes["export"] + c.minutes["gpu"] < 2 for c in plan.cells.values())


def test_a_preset_without_a_recording_borrows_one_of_the_same_vit_and_says_so():
    model = load()
    assert model.preset("da3mono-large").recorded == "da3metric-large"  # one graph, other weights
    assert model.preset("da3-large").recorded == "da3metric-large"  # the same ViT-L, another head
    assert model.preset("da3-small").recorded == "da3-small"


def test_the_dvc_cache_is_where_the_checkouts_dvc_config_puts_it_and_links_count_once(tmp_path):
    assert host.dvc_cache(tmp_path) == (tmp_path / ".dvc" / "cache", "reflink,copy")  # DVC's defaults
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("[core]\n    remote = storage\n[cache]\n    dir = ../../shared-cache\n")
    (tmp_path / ".dvc" / "config.local").write_text("[cache]\n    type = hardlink,symlink\n")
    assert host.dvc_cache(tmp_path) == (tmp_path / ".dvc" / "../../shared-cache", "hardlink,symlink")
    here = cost_plan.Machine.here(tmp_path)
    assert here.links and here.one_disk and here.memory > 0
    plan = cost_plan.plan(load_params(REPO / "params.yaml"), root=tmp_path, figures=fake_recordings(tmp_path / "f"),
                          machine=here)
    assert plan.new_bytes() == pytest.approx((0, 2030e6))  # the workspace links to the cache's one copy


def test_a_stage_says_its_expected_time_as_an_estimate_and_nothing_without_a_recording(tmp_path):
    said = cost_model.expected("da3-small", 896, 504, "GPU s", times=2)
    assert said.startswith("expected about ") and f"(estimated from {cost_model.FAMILY} (" in said, said
    assert ", as da3metric-large)" in cost_model.expected("da3-large", 896, 504, "export s")  # a borrowed fit says so
    assert cost_model.expected("da3-small", 896, 504, "GPU s", figures=tmp_path) == ""
