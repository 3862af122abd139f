"""Qualcomm NPUs at the tests' small shape: a real compile by LiteRT's AOT compiler and a real run of the compiled
binary on Qualcomm's HTP simulator (onnxruntime-qnn), no stand-ins."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from ai_edge_litert.aot.vendors.qualcomm import target as qualcomm
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.tools import flatbuffer_utils

from da3_litert_farm.checks.agreement import compare, relative_rms
from da3_litert_farm.checks.fidelity import TFLiteModel
from da3_litert_farm.checks.npu import simulate, simulate_chip
from da3_litert_farm.checks.npu_proxy import simulated_file
from da3_litert_farm.config.params import NpuParams, ParamsError, parse_params
from da3_litert_farm.core.aspects import Shape, plan_aspect
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.core.npu_targets import QUALCOMM
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.photo_input import load_photo_array, load_photo_tensor
from da3_litert_farm.npu.aot_compiler import NpuCompileError, compile_for, partitions
from da3_litert_farm.npu.htp_simulator import HtpSimulator
from da3_litert_farm.npu.qnn_host import QAIRT_SERIES, qairt_version

from tests.conftest import SMALL
from tests.farm_repo import REPO

import yaml

SOC = "SM8650"


def cpu_depth(model_file, image: np.ndarray) -> np.ndarray:
    """The file on LiteRT's CPU (XNNPACK): the reference the compiled binary should reproduce in FP16."""
    interpreter = Interpreter(model_path=str(model_file))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).copy()


@pytest.fixture(scope="module")
def compiled(small_tflite, tmp_path_factory):
    """The shipped (FP16) small file compiled for SOC: (the compile's record, its path)."""
    out = tmp_path_factory.mktemp("npu") / f"{SOC}.tflite"
    return compile_for(small_tflite[1], SOC, out), out


def test_the_farm_knows_the_chips_litert_compiles_for():
    assert set(QUALCOMM) == {m.value for m in qualcomm.SocModel if m != qualcomm.SocModel.ALL}


def test_the_host_libraries_are_the_qairt_litert_was_released_against():
    assert qairt_version().startswith(QAIRT_SERIES + ".")


def test_every_op_compiles_into_one_npu_partition(compiled, small_tflite):
    record, out = compiled
    source_ops = sum(len(g.operators) for g in flatbuffer_utils.read_model(str(small_tflite[1])).subgraphs)
    assert (record.ops_on_npu, record.ops_total, record.partitions, record.cpu_ops) == (source_ops, source_ops, 1, [])
    assert record.fully_on_npu and record.bytes == out.stat().st_size
    (part,) = partitions(out)
    assert part.offset + part.size <= out.stat().st_size and part.size > out.stat().st_size // 2  # the weights
    assert [shape for _, shape in part.inputs] == [[1, 3, *SMALL]]
    assert [shape for _, shape in part.outputs] == [[1, 1, *SMALL]]


def test_the_simulator_runs_the_binary_close_to_the_cpu_file(compiled, small_tflite):
    _, out = compiled
    image = load_photo_array("coffee", *SMALL)
    depth = HtpSimulator(out, SOC)(image)
    reference = cpu_depth(small_tflite[1], image)
    agreement = compare(depth, reference)
    # FP16 arithmetic on the HTP: measured relative L2 2.6e-3 and 1 - r 2e-5 against XNNPACK at this shape.
    assert depth.shape == (1, 1, *SMALL) and np.isfinite(depth).all()
    assert relative_rms(depth, reference) < 1e-2 and agreement["pearson"] > 0.9999


def test_a_corrupted_binary_is_caught_by_the_simulator_check(compiled, small_tflite, tmp_path):
    _, out = compiled
    broken = tmp_path / out.name
    shutil.copy(out, broken)
    (part,) = partitions(broken)
    with open(broken, "r+b") as f:  # 64 KiB of noise in the middle of the context binary (its weights)
        f.seek(part.offset + part.size // 2)
        f.write(np.random.default_rng(0).integers(0, 256, 1 << 16, dtype=np.uint8).tobytes())
    image = load_photo_array("coffee", *SMALL)
    reference = cpu_depth(small_tflite[1], image)
    refs = {"coffee": (image, reference)}
    intact = simulate(out, SOC, refs, {"coffee": reference}, min_pearson=0.999, max_mean_rel=0.01)
    corrupted = simulate(broken, SOC, refs, {"coffee": reference}, min_pearson=0.999, max_mean_rel=0.01)
    assert intact["passed"], intact["failures"]
    assert not corrupted["passed"]
    assert any(f.startswith("pearson ") and "gate npu.min_pearson 0.999" in f for f in corrupted["failures"]) or \
        any("non-finite" in f for f in corrupted["failures"]), corrupted["failures"]


def test_a_chip_whose_npu_cannot_take_the_graph_fails_naming_the_chip_and_the_op(small_tflite, tmp_path):
    out = tmp_path / "SM8350.tflite"
    with pytest.raises(NpuCompileError) as failure:
        compile_for(small_tflite[1], "SM8350", out)  # HTP v68: no FP16, and DA3's GELU has no kernel there
    assert str(failure.value).startswith("Qualcomm SM8350: the compiler refused the graph: ")
    # What QNN refused, from its log: the op without a kernel (q::QNN_Gelu) and the op it could not create; the
    # compiler's threads interleave their log lines, so one or the other can come out cut.
    assert re.search(r"(no properties registered for q::QNN_Gelu|could not create op: q::\w+)", str(failure.value))
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing half-written


def shipped_params() -> dict:
    return yaml.safe_load((REPO / "params.yaml").read_text())


@pytest.mark.parametrize("npu, message", [
    ({"targets": ["SM8650", "SM9999"]},
     "npu.targets[1]: 'SM9999' must be a Qualcomm chip LiteRT's compiler targets: SA8255, SA8295, SM8350, SM8450, "
     "SM8475, SM8550, SM8650, SM8750, SM8845, SM8850"),
    ({"targets": ["SM8650"], "simulate": ["SM8750"]},
     "npu.simulate: ['SM8750'] not in npu.targets ['SM8650']: the simulator runs the files the farm compiled"),
    ({"targets": ["SM8845"], "simulate": ["SM8845"]},
     "npu.simulate: the farm does not know the SoC id and HTP arch of ['SM8845']"),
    ({"targets": ["SM8650"], "simulate": []},
     "npu.simulate: empty, so no compiled file would be checked; name at least one of npu.targets ['SM8650']"),
    ({"min_pearson": 1.5}, "npu.min_pearson: 1.5 must be"),
    ({"simulate_tier": 56}, "npu.simulate_tier: 56 cannot be the simulator's proxy tier of cell small-896-9x16: "
                            "aspects.9x16: ratio 9:16 at long side 56 gives a short side of 28 px"),
    ({"simulate_tier": 100}, "npu.simulate_tier: 100 is not a multiple of 14"),
])
def test_bad_npu_params_are_refused_by_name(npu, message):
    doc = shipped_params()
    doc["npu"].update(npu)
    with pytest.raises(ParamsError) as refused:
        parse_params(doc, base_dir=REPO, checkpoint_files=False)
    assert message in str(refused.value)


def test_no_npu_targets_is_allowed():
    doc = shipped_params()
    doc["npu"].update(targets=[], simulate=[])
    assert parse_params(doc, base_dir=REPO, checkpoint_files=False).npu.targets == ()


def test_the_plan_counts_the_npu_files_and_scales_its_estimate_with_the_pixels(tmp_path, monkeypatch):
    from da3_litert_farm.config.npu_plan import npu_plan

    recording = tmp_path / "npu-896x504.json"
    recording.write_text(json.dumps({
        "measured_on": {"date": "2026-12-07", "cpu": "a CPU"},
        "figures": [{"shape": "896 x 504", "chip": "SM8650", "MB": 60.0, "compile s": 60.0, "simulator s": 600.0},
                    {"shape": "896 x 504", "chip": "SM8750", "MB": 60.0, "compile s": 60.0}]}))
    monkeypatch.setenv("FARM_NPU_JOBS", "1")  # one compile at a time, whatever this machine's cores
    doc = shipped_params()
    proxied = npu_plan(parse_params(doc, base_dir=REPO, checkpoint_files=False), recording)
    assert proxied[0].startswith("npu: 4 cells x 4 chips (SM8550, SM8650, SM8750, SM8850) = 16 files compiled ahead "
                                 "of time; simulated as SM8650 on coffee, through a proxy at tier 224")
    # By hand: the 4 cells hold 4.67x the recording's pixels, so 4.67 x 60 s x 4 chips of compiles = 18.7 min; their
    # proxies at tier 224 hold 0.29x, each compiled (60 s) and simulated (600 s) once: 3.2 min.
    assert "and 22 min" in proxied[1]
    monkeypatch.setenv("FARM_NPU_JOBS", "2")  # two chips compiled at once: 9.3 min of compiles
    assert "and 13 min" in npu_plan(parse_params(doc, base_dir=REPO, checkpoint_files=False), recording)[1]
    monkeypatch.setenv("FARM_NPU_JOBS", "1")
    doc["npu"]["simulate_tier"] = None  # every shipped file simulated: 4.67 x 600 s more
    full = npu_plan(parse_params(doc, base_dir=REPO, checkpoint_files=False), recording)
    assert "and 65 min" in full[1]
    doc["tiers"] = [448]  # a quarter of the pixels of every cell
    quarter = npu_plan(parse_params(doc, base_dir=REPO, checkpoint_files=False), recording)
    minutes = [float(re.search(r"and (\d+) min", lines[1])[1]) for lines in (full, quarter)]
    assert minutes[1] == pytest.approx(minutes[0] / 4, rel=0.1) and minutes[0] > 0
    assert "about 960 MB of NPU files" in full[1]  # 16 files of the recording's 60 MB: the weights, whatever the shape
    doc["npu"].update(targets=[], simulate=[])
    assert npu_plan(parse_params(doc, base_dir=REPO, checkpoint_files=False)) == [
        "npu: no NPU files (npu.targets is empty)"]
    doc = shipped_params()
    assert npu_plan(parse_params(doc, base_dir=REPO, checkpoint_files=False), tmp_path / "none.json")[1] == \
        "npu: no cost estimate (none.json not recorded: make bench-npu)"


def test_a_cell_above_simulate_tier_is_simulated_through_its_proxy(stress_checkpoint_dir, stress_net, tmp_path,
                                                                   monkeypatch):
    """A tier-224 cell with npu.simulate_tier 112: the simulator runs the same model and aspect built at tier 112
    (the shipped rewrites, FP16 weights), gated against the official model at that shape."""
    (tmp_path / "artifacts/checkpoints").mkdir(parents=True)
    (tmp_path / "artifacts/checkpoints/small").symlink_to(stress_checkpoint_dir)  # what checkpoint@small leaves
    monkeypatch.chdir(tmp_path)
    cell = Cell("small", "da3-small", 224, plan_aspect("a", {"ratio": "16:9"}, 224))
    assert cell.proxy_shape(None) is None and cell.proxy_shape(224) is None  # the shipped file itself
    (tmp_path / "work").mkdir()
    sim_file = simulated_file(cell, 112, 128, ("coffee",), tmp_path / "work", say=lambda line: None)
    assert sim_file.proxy and sim_file.shape == Shape(70, 112)  # 16:9 at 112: 63 px rounded to 5 patches of 14
    assert TFLiteModel(sim_file.file).input_shape == (1, 3, 70, 112)
    image, official = sim_file.refs["coffee"]
    expected = official_depth(stress_net, load_photo_tensor("coffee", 70, 112)).numpy()  # the net, not the files
    np.testing.assert_allclose(official, expected, rtol=1e-4, atol=1e-6)
    assert compare(sim_file.cpu["coffee"], official)["pearson"] > 0.9999  # the proxy's CPU file is a faithful build

    npu = NpuParams(("SM8650",), ("SM8650",), gate_min_pearson=0.999, gate_max_mean_rel=0.01, simulate_tier=112)
    entry = simulate_chip(sim_file, tmp_path / "unused.tflite", "SM8650", npu, tmp_path / "work", say=lambda line: None)
    assert entry["passed"], entry["failures"]
    assert (entry["proxy"], entry["shape"], list(entry["photos"])) == (True, "70x112", ["coffee"])
    assert entry["pearson_min"] >= 0.999 and entry["photos"]["coffee"]["vs_cpu"]["pearson"] > 0.9999
