"""The precision profiler (where FP16 error enters, on the GPU accelerator) and the outlier
stress weights it is meant to be run on. The profiler needs a WebGPU adapter, as test_gpu does."""

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from da3_litert_farm.gpu_runtime import GpuError
from da3_litert_farm.mono_depth import MonoDepth, RewriteOptions
from da3_litert_farm.official import official_depth
from da3_litert_farm.photos import load_photo_tensor
from da3_litert_farm.precision import format_table, profile, tap_rows
from da3_litert_farm.stress import OUTLIERS, stress_model
from tests.conftest import SMALL

REPO = Path(__file__).resolve().parents[1]
TAPS = (["embed"] + [f"block{i:02d}" for i in range(12)] + [f"stage{i}" for i in range(4)]
        + ["refine4", "refine3", "refine2", "refine1", "output_conv1", "upsampled", "logit", "depth"])
FP16_MAX = 65504.0


def test_tap_rows_refuse_gpu_outputs_out_of_tap_order():
    rng = np.random.default_rng(0)
    reference = {"a": rng.normal(size=(1, 4, 8)), "b": rng.normal(size=(1, 4, 8))}
    fp32 = [reference["a"] + 1e-6, reference["b"]]
    fp16 = [reference["a"] + 1e-3, np.full((1, 4, 8), np.nan)]
    rows = tap_rows(reference, fp32, fp16)
    assert rows["a"]["finite"] and 1e-4 < rows["a"]["fp16_rel_rms"] < 1e-2
    assert not rows["b"]["finite"] and rows["b"]["fp16_rel_rms"] is None
    with pytest.raises(GpuError, match="tap a: .* out of tap order"):
        tap_rows(reference, fp32[::-1], fp16)
    with pytest.raises(GpuError, match="2 taps but 1 GPU outputs"):
        tap_rows(reference, fp32[:1], fp16[:1])


def test_taps_are_the_forward_in_order(stress_net):
    mono = MonoDepth(copy.deepcopy(stress_net), *SMALL).eval()
    image = load_photo_tensor("astronaut", *SMALL)
    with torch.no_grad():
        taps = mono.forward_taps(image)
        assert list(taps) == TAPS
        assert torch.equal(taps["depth"], mono(image))
        assert torch.equal(taps["depth"], torch.exp(taps["logit"]))


@pytest.fixture(scope="module")
def small_profile(stress_net):
    return profile(copy.deepcopy(stress_net), "small", *SMALL, RewriteOptions(), "motorcycle_left")


def test_profiler_runs_every_tap_on_the_gpu_in_fp16(small_profile):
    taps = small_profile["taps"]
    assert list(taps) == TAPS
    for name, row in taps.items():
        assert row["finite"], name
        assert row["fp32_rel_rms"] <= 1e-2, name  # GPU-FP32 output is this tap's PyTorch value
        assert 0 < row["fp16_rel_rms"] < 0.05, name  # FP16 really ran, and stayed close
        assert row["max_abs"] > 0
    # The input already carries FP16 rounding (about 2^-12 relative); the depth carries more.
    assert 1e-5 < taps["embed"]["fp16_rel_rms"] < taps["depth"]["fp16_rel_rms"]
    table = format_table(small_profile)
    assert all(f"\n{name} " in table for name in TAPS), table


def test_outlier_stress_weights_exceed_the_fp16_square_range(stress_net):
    net = stress_model(seed=0, outliers=True)
    image = load_photo_tensor("astronaut", *SMALL)
    with torch.no_grad():
        taps = MonoDepth(copy.deepcopy(net), *SMALL).eval().forward_taps(image)
        plain = MonoDepth(copy.deepcopy(stress_net), *SMALL).eval().forward_taps(image)
    last = taps["block11"][0, 1:]  # patch tokens, [N, C]
    channels = list(OUTLIERS)
    for c, value in OUTLIERS.items():
        assert torch.allclose(last[:, c].median(), torch.tensor(value), rtol=0.2), (c, last[:, c].median())
    assert float(last[:, channels].abs().min()) ** 2 > FP16_MAX  # x*x overflows FP16 on every token
    others = np.setdiff1d(np.arange(last.shape[1]), channels)
    assert float(last[:, others].abs().max()) < 50
    assert float(plain["block11"].abs().max()) ** 2 < FP16_MAX  # the plain stress weights never get there
    depth = official_depth(net, image)
    lo, hi = torch.quantile(depth.flatten(), torch.tensor([0.01, 0.99]))
    assert torch.isfinite(depth).all() and 3 < float(hi / lo) < 30  # still about a decade of depth


def test_profiler_names_a_bad_aspect_before_any_work():
    result = subprocess.run([sys.executable, "-m", "da3_litert_farm.precision", "21x9"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "precision 21x9: aspect '21x9' is not in params.yaml; configured: ['16x9', '3x4', '9x16']" in result.stderr


def test_profiler_refuses_a_bad_layernorm_shift():
    result = subprocess.run([sys.executable, "-m", "da3_litert_farm.precision", "9x16", "--layernorm-shift", "-2"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--layernorm-shift: '-2': give an integer K in [1, 12]" in result.stderr


def test_prescaled_layernorms_keep_outlier_weights_faithful_in_fp16():
    """Why the shipped graph prescales its LayerNorms (the profiler's tables, at a small shape): with
    outliers above 256, the head norm's x*x overflows FP16 where it reads blocks 9 and 11; prescaled
    by 2^-4 it does not, and the depth map is 10x closer to FP32."""
    net = stress_model(seed=0, outliers=True)
    before = profile(copy.deepcopy(net), "outliers", *SMALL, RewriteOptions(layernorm_shift=None), "motorcycle_left")["taps"]
    after = profile(net, "outliers", *SMALL, RewriteOptions(), "motorcycle_left")["taps"]
    assert before["block09"]["max_abs"] > 256 and before["stage1"]["fp16_one_minus_pearson"] < 1e-4
    assert before["stage2"]["fp16_one_minus_pearson"] > 1e-2  # broken where |x| > 256 enters
    assert after["stage2"]["fp16_one_minus_pearson"] < 1e-4
    assert after["depth"]["fp16_one_minus_pearson"] * 5 < before["depth"]["fp16_one_minus_pearson"]
