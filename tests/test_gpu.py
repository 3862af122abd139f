"""The shipped graph on LiteRT's real GPU accelerator (FP16), and the gates on what it returns.

Needs a WebGPU adapter: `make test` runs `python -m da3_litert_farm.gpu.gpu_setup` first, which installs
Mesa's software Vulkan driver on a machine without a GPU.
"""

import glob
import json
import os
import re
import subprocess
import threading
import time
import sys

import jsonschema
import numpy as np
import pytest
import torch

from da3_litert_farm.checks.agreement import compare, gate_fidelity
from da3_litert_farm.checks.gpu import GATE_KEYS, run_on_gpu
from da3_litert_farm.core.gpu_modes import recommend
from da3_litert_farm.ops.catalog import gpu_entry, validate_catalog
from da3_litert_farm.gpu.gpu_runtime import (GpuModel, accumulation_probe_bytes, arithmetic_precision, probe,
                                             probe_model_bytes, wait_until_cpu_idle)
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.config.params import load_params
from da3_litert_farm.model.photo_input import load_photo_tensor
from tests.conftest import SMALL, SWIFTSHADER_ICD
from tests.test_params import minimal_catalog
from tests.test_rewrites import Call, graph_of

PHOTOS = ("motorcycle_left", "astronaut", "coffee")
DEFAULTS = load_params().validation  # the repository's gates: what a user's farm applies


def has_gpu_device() -> bool:
    """A GPU the kernel exposes: a DRM render node, or NVIDIA's own device node."""
    return bool(glob.glob("/dev/dri/renderD*") or glob.glob("/dev/nvidia[0-9]*"))


def test_probe_finds_an_adapter_and_runs_on_it():
    adapter, problem = probe()
    assert problem == ""
    if sys.platform.startswith("linux") and not has_gpu_device():
        # No GPU here: the one adapter is Mesa's lavapipe (what gpu_setup installs), as Dawn names it.
        assert re.fullmatch(r"llvmpipe \(LLVM [\d.]+, \d+ bits\)", adapter.name), adapter
        assert (adapter.backend, adapter.type) == ("Vulkan", "CPU / Software"), adapter
    else:
        assert adapter.backend in {"Vulkan", "Metal", "D3D12", "D3D11", "OpenGL", "OpenGLES"}, adapter


def test_probe_graph_runs_fully_accelerated(tmp_path):
    path = tmp_path / "probe.tflite"
    path.write_bytes(probe_model_bytes())
    x = np.linspace(-3, 3, 256, dtype=np.float32).reshape(1, 8, 8, 4)
    model = GpuModel(path)
    assert model.fully_accelerated and model.precision == "fp16"
    # The delegate stores x in FP16: the result is 2 * fp16(x), not 2 * x. This is the FP16 a phone sees.
    y = model(x)
    np.testing.assert_array_equal(y, 2 * x.astype(np.float16).astype(np.float32))
    assert not np.array_equal(y, 2 * x)
    np.testing.assert_array_equal(GpuModel(path, "fp32")(x), 2 * x)
    with pytest.raises(ValueError, match="input"):
        model(np.zeros((1, 2, 3), np.float32))


def test_each_gpu_mode_has_the_arithmetic_it_asks_for(tmp_path):
    """The accumulation probe in the three modes an app can ask for, against its sums computed here."""
    from ai_edge_litert.tools import flatbuffer_utils

    path = tmp_path / "accumulation_probe.tflite"
    path.write_bytes(accumulation_probe_bytes())
    flat = flatbuffer_utils.read_model(str(path))
    (w,) = [t for t in flat.subgraphs[0].tensors if t.name == b"w"]
    weights = np.frombuffer(bytes(flat.buffers[w.buffer].data), np.float32).reshape(w.shape)
    assert np.array_equal(weights.astype(np.float16).astype(np.float32), weights)  # FP16 holds every weight
    exact = weights.astype(np.float64).sum(axis=1)  # x is all ones: each output is its row's sum
    x = np.ones((1, weights.shape[1]), np.float32)
    outputs = {mode: GpuModel(path, mode)(x).ravel() for mode in ("fp16", "fp16_fp32_accum", "fp32")}
    np.testing.assert_array_equal(outputs["fp32"], exact.astype(np.float32))
    np.testing.assert_array_equal(outputs["fp16_fp32_accum"], exact.astype(np.float16).astype(np.float32))
    assert np.all(outputs["fp16"] != exact.astype(np.float16).astype(np.float32)), outputs  # summed in FP16
    assert [arithmetic_precision(m) for m in ("fp16", "fp16_fp32_accum", "fp32")] == \
        ["fp16", "fp16_fp32_accum", "fp32"]
    with pytest.raises(ValueError, match=r"GPU mode 'fp16_fp32'.*'fp16', 'fp16_fp32_accum', 'fp32'"):
        GpuModel(path, "fp16_fp32")


@pytest.fixture(scope="module")
def references(stress_net):
    out = {}
    for photo in PHOTOS:
        image = load_photo_tensor(photo, *SMALL)
        out[photo] = (image.numpy(), official_depth(stress_net, image).numpy())
    return out


@pytest.fixture(scope="module")
def gpu_run(small_tflite, references):
    """run_on_gpu on the small shipped file: (the gpu.json record, the depth map of each photo)."""
    _, fp16 = small_tflite
    record, depths = run_on_gpu(fp16, references, DEFAULTS.gpu_min_pearson, DEFAULTS.gpu_max_mean_rel)
    assert set(depths) == set(record["photos"]) == set(PHOTOS)
    return record, depths


@pytest.fixture(scope="module")
def gpu_record(gpu_run):
    return gpu_run[0]


def test_the_record_holds_what_the_gpu_returns(small_tflite, references, gpu_run):
    """Run each photo again on a model of its own; its figures, by numpy's formulas, are the record's."""
    record, depths = gpu_run
    model = GpuModel(small_tflite[1])
    for photo, (image, reference) in references.items():
        depth = model(image)
        np.testing.assert_array_equal(depth, depths[photo])  # the GPU computes the same bits every time
        d, r = depth.astype(np.float64).ravel(), reference.astype(np.float64).ravel()
        figures = record["photos"][photo]
        assert figures["pearson"] == pytest.approx(np.corrcoef(d, r)[0, 1], abs=1e-10), photo
        assert figures["mean_rel_error"] == pytest.approx(np.mean(np.abs(d - r) / np.abs(r)), rel=1e-9), photo


def test_shipped_small_model_runs_fully_on_the_gpu_in_fp16(gpu_record):
    assert gpu_record["passed"], gpu_record["failures"]
    assert gpu_record["fully_accelerated"] is True and gpu_record["precision"] == "fp16"
    assert gpu_record["adapter"]["name"]
    assert set(gpu_record["photos"]) == set(PHOTOS)
    for photo, m in gpu_record["photos"].items():
        assert m["finite"], photo
        assert m["pearson"] >= DEFAULTS.gpu_min_pearson and m["mean_rel_error"] <= DEFAULTS.gpu_max_mean_rel
    assert gpu_record["gates"]["min_pearson"]["value"] == min(m["pearson"] for m in gpu_record["photos"].values())
    assert all(g["passed"] for g in gpu_record["gates"].values())
    json.dumps(gpu_record)  # gpu.json is written from this record


def test_gpu_fp16_differs_from_the_cpu_by_fp16_sized_error(gpu_record):
    """The GPU really computes in FP16: its error is far above the CPU's (FP32 activations)."""
    worst = gpu_record["mean_rel_max"]
    assert 1e-5 < worst < 0.05, worst


def test_enforce_f32_on_the_gpu_matches_the_official_model_closely(small_tflite, references):
    _, fp16 = small_tflite
    model = GpuModel(fp16, "fp32")
    assert model.precision == "fp32" and model.fully_accelerated
    image, reference = references["astronaut"]
    assert compare(model(image), reference)["pearson"] >= 0.99999


def test_a_doubled_depth_passes_pearson_but_fails_the_scale_sensitive_gate(small_tflite, references):
    _, fp16 = small_tflite
    model = GpuModel(fp16)
    scaled = {}
    for photo, (image, reference) in references.items():
        scaled[photo] = compare(2.0 * model(image), reference)
    gates, failures = gate_fidelity(scaled, DEFAULTS.gpu_min_pearson, DEFAULTS.gpu_max_mean_rel, GATE_KEYS)
    assert gates["min_pearson"]["passed"] and not gates["max_mean_rel"]["passed"]
    assert len(failures) == len(PHOTOS)
    assert all(re.match(r"mean relative error (9\.9\de-01|1\.0\de\+00) on photo '\w+' > gate "
                        r"validation.gpu_max_mean_rel", f) for f in failures), failures


def test_a_graph_with_gather_nd_is_not_fully_accelerated_and_fails(stress_net, tmp_path):
    """The unbaked pos-embed interpolation lowers to GATHER_ND, which the GPU delegate does not take."""
    vit = stress_net.backbone.pretrained
    n = (SMALL[0] // 14) * (SMALL[1] // 14)
    x = torch.zeros(1, 1 + n, 384)
    report = graph_of(Call(lambda t: t + vit.interpolate_pos_encoding(t, *SMALL), vit), x, tmp_path, "posemb")
    assert report.op_histogram.get("GATHER_ND", 0) > 0
    refs = {p: (x.numpy(), x.numpy()) for p in PHOTOS}
    record, depths = run_on_gpu(tmp_path / "posemb.tflite", refs, DEFAULTS.gpu_min_pearson, DEFAULTS.gpu_max_mean_rel)
    assert record["fully_accelerated"] is False and record["passed"] is False and depths == {}
    assert record["gates"]["fully_accelerated"] == {"passed": False}
    assert "GATHER_ND" in record["rejected_ops"]
    assert any(f.startswith("not fully accelerated: ops the GPU delegate rejected run on the CPU (")
               and "GATHER_ND" in f for f in record["failures"]), record["failures"]


def test_the_check_runs_each_mode_an_app_may_choose_with_its_own_figures(small_tflite, references, gpu_run):
    """validation.gpu_modes: the default FP16 at the record's top level (as gpu_run, above, has it), FP32
    accumulation beside it with its own arithmetic, figures and gates."""
    modes = ("fp16", "fp16_fp32_accum")
    record, depths = run_on_gpu(small_tflite[1], {"coffee": references["coffee"]}, DEFAULTS.gpu_min_pearson,
                                DEFAULTS.gpu_max_mean_rel, modes, {m: DEFAULTS.gpu_gates(m) for m in modes})
    assert record["passed"] and record["precision"] == "fp16" and set(depths) == {"coffee"}
    assert record["pearson_min"] == gpu_run[0]["photos"]["coffee"]["pearson"]  # the same default-mode run
    accum = record["modes"]["fp16_fp32_accum"]
    assert set(record["modes"]) == {"fp16_fp32_accum"} and accum["passed"] and accum["fully_accelerated"]
    assert accum["precision"] == "fp16_fp32_accum" and accum["gates"]["fp16_fp32_accum"] == {"passed": True}
    assert accum["pearson_min"] == accum["photos"]["coffee"]["pearson"] != record["pearson_min"]  # its own run
    # Each mode under its own gates: params.yaml holds FP32 accumulation to a tighter mean relative error.
    assert record["gates"]["max_mean_rel"]["limit"] == 0.03 and accum["gates"]["max_mean_rel"]["limit"] == 0.02
    # FP32 sums bring this file closer to the official model, so that is the mode apps are told to choose.
    assert accum["pearson_min"] > record["pearson_min"] and record["recommended_mode"] == "fp16_fp32_accum"
    # The catalog carries the other mode's figures, as the schema allows only an app's modes.
    entry = gpu_entry(record)
    assert entry["modes"] == {"fp16_fp32_accum": {"precision": "fp16_fp32_accum", "pearson_min": accum["pearson_min"],
                                                  "mean_rel_max": accum["mean_rel_max"],
                                                  "seconds": round(accum["seconds"], 1)}}
    assert entry["recommended_mode"]["mode"] == "fp16_fp32_accum"
    assert "FP16_WITH_FP32_ACCUM" in entry["recommended_mode"]["kotlin"]
    assert "kFp16WithFp32Accum" in entry["recommended_mode"]["cpp"]
    catalog = minimal_catalog()
    catalog["models"][0]["gpu"] = entry
    validate_catalog(catalog)
    entry["modes"]["fp32"] = entry["modes"]["fp16_fp32_accum"]
    with pytest.raises(jsonschema.ValidationError) as refused:
        validate_catalog(catalog)
    assert "'fp32' is not one of ['fp16', 'fp16_fp32_accum']" in [e.message for e in refused.value.context]


def test_a_mode_that_fails_its_own_gate_fails_the_check_and_is_not_recommended(small_tflite, references):
    """validation.gpu_mode_gates: a gate FP16 arithmetic never reaches (Pearson 1) set for FP32 accumulation
    alone fails that mode, named by its own key, while the default mode passes under its gates."""
    gates = {"fp16_fp32_accum": (1.0, 0.5, ("validation.gpu_mode_gates.fp16_fp32_accum.min_pearson",
                                            "validation.gpu_mode_gates.fp16_fp32_accum.max_mean_rel"))}
    record, _ = run_on_gpu(small_tflite[1], {"coffee": references["coffee"]}, DEFAULTS.gpu_min_pearson,
                           DEFAULTS.gpu_max_mean_rel, ("fp16", "fp16_fp32_accum"), gates)
    assert record["gates"]["min_pearson"]["passed"] and not record["modes"]["fp16_fp32_accum"]["passed"]
    assert not record["passed"] and len(record["failures"]) == 1, record["failures"]
    assert re.fullmatch(r"fp16_fp32_accum: pearson 0\.\d+ on photo 'coffee' < gate "
                        r"validation\.gpu_mode_gates\.fp16_fp32_accum\.min_pearson 1\.0", record["failures"][0]), \
        record["failures"]
    assert record["recommended_mode"] == "fp16"


def test_the_recommended_mode_is_the_most_faithful_that_passed():
    figures = {"fp16": {"passed": True, "pearson_min": 0.9994}, "fp16_fp32_accum": {"passed": True, "pearson_min": 0.9996}}
    assert recommend(figures) == "fp16_fp32_accum"
    assert recommend({**figures, "fp16_fp32_accum": {"passed": False, "pearson_min": 0.9996}}) == "fp16"
    assert recommend({**figures, "fp16_fp32_accum": {"passed": True, "pearson_min": 0.9994}}) == "fp16"  # a tie
    assert recommend({"fp16": figures["fp16"]}) == "fp16"


ON_SWIFTSHADER = """
import json, sys
import numpy as np
from da3_litert_farm.checks.gpu import run_on_gpu
from da3_litert_farm.gpu.gpu_runtime import GpuModel, probe_model_bytes
from pathlib import Path

probe = Path(sys.argv[3])
probe.write_bytes(probe_model_bytes())
x = np.linspace(-3, 3, 256, dtype=np.float32).reshape(1, 8, 8, 4)
exact = bool(np.array_equal(GpuModel(probe)(x), 2 * x))
with np.load(sys.argv[2]) as saved:
    refs = {p: (saved[p + ".image"], saved[p + ".depth"]) for p in sorted({k.split(".")[0] for k in saved.files})}
refs = dict(sorted(refs.items())[:1])  # one photo: the accumulation mode runs it on this slow adapter
record, depths = run_on_gpu(sys.argv[1], refs, 0.99, 0.05, ("fp16", "fp16_fp32_accum"))
print(json.dumps({"exact_sum": exact, "record": record, "depths": len(depths)}))
"""


@pytest.mark.skipif(not SWIFTSHADER_ICD.exists(), reason=f"no SwiftShader here ({SWIFTSHADER_ICD}): `make browser`")
def test_an_adapter_without_fp16_is_found_out_and_fails_the_check_before_any_photo(small_tflite, references, tmp_path):
    """SwiftShader lacks shaderFloat16, so ML Drift silently computes in FP32 there: figures from it would not
    describe a phone's FP16. The probe graph returns 2 * x exactly (lavapipe: 2 * fp16(x), above)."""
    np.savez(tmp_path / "refs.npz", **{f"{p}.{kind}": a for p, (image, depth) in references.items()
                                      for kind, a in (("image", image), ("depth", depth))})
    env = {**os.environ, "VK_ICD_FILENAMES": str(SWIFTSHADER_ICD)}
    proc = subprocess.run([sys.executable, "-c", ON_SWIFTSHADER, str(small_tflite[1]), str(tmp_path / "refs.npz"),
                           str(tmp_path / "probe.tflite")], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    record = result["record"]
    assert result["exact_sum"] is True
    assert record["adapter"]["name"].startswith("SwiftShader"), record["adapter"]
    assert record["fully_accelerated"] and record["precision"] == "fp32"
    assert record["passed"] is False and record["gates"]["fp16"] == {"passed": False}
    assert record["photos"] == {} and result["depths"] == 0  # minutes of inference spared
    assert any(f.startswith(f"the adapter {record['adapter']['name']} (Vulkan, CPU / Software) computes in FP32 only")
               for f in record["failures"]), record["failures"]
    # Asked for FP32 accumulation, it does what the mode says even without FP16 arithmetic: the probe's sum
    # is the FP16 rounding of the exact one (FP16 storage, FP32 sums), so that mode is checked on its photos.
    accum = record["modes"]["fp16_fp32_accum"]
    assert accum["precision"] == "fp16_fp32_accum" and accum["gates"]["fp16_fp32_accum"] == {"passed": True}
    assert set(accum["photos"]) == {min(references)} and not any(f.startswith("fp16_fp32_accum: the adapter")
                                                                for f in record["failures"]), record["failures"]


def test_idle_wait_returns_soon_when_nothing_runs():
    started = time.monotonic()
    assert wait_until_cpu_idle(interval=0.2) < 0.2  # quiet from the first interval on
    assert 0.4 <= time.monotonic() - started < 5  # two quiet intervals make sure


def test_idle_wait_measures_how_long_the_process_stayed_busy():
    def spin(seconds: float) -> None:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    worker = threading.Thread(target=spin, args=(1.5,))
    worker.start()
    busy = wait_until_cpu_idle(interval=0.2)
    worker.join()
    assert 1.2 < busy < 2.2, busy
