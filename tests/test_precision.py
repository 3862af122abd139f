"""The precision profiler (where FP16 error enters, on the GPU accelerator) and the outlier
stress weights it is meant to be run on. The profiler needs a WebGPU adapter, as test_gpu does."""

import copy
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from da3_litert_farm.checks.agreement import relative_rms
from da3_litert_farm.convert.export import convert_to_tflite
from da3_litert_farm.dev.fp16_floor import Fp16Storage, tap_modules
from da3_litert_farm.gpu.gpu_runtime import GpuError, GpuModel
from da3_litert_farm.model.mono_depth import MonoDepth, RewriteOptions
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.photo_input import load_photo_tensor
from da3_litert_farm.dev.precision import format_table, profile, tap_rows
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.model.stress import OUTLIERS, stress_model
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


def test_tap_modules_output_their_taps(stress_net):
    mono = MonoDepth(copy.deepcopy(stress_net), *SMALL).eval()
    image = load_photo_tensor("astronaut", *SMALL)
    modules, outputs = tap_modules(mono), {}
    assert list(modules) == TAPS[:-1]  # all but depth, the final exp
    handles = [m.register_forward_hook(lambda _m, _i, out, name=name: outputs.setdefault(name, out))
               for name, m in modules.items()]
    with torch.no_grad():
        taps = mono.forward_taps(image)
    for handle in handles:
        handle.remove()
    for name in TAPS[1:-1]:
        assert torch.equal(outputs[name], taps[name]), name
    assert torch.allclose(outputs["embed"], taps["embed"][:, 1:] - mono.pos_embed.table()[:, 1:], atol=1e-5)  # patch tokens


def test_fp16_storage_rounds_every_result(stress_net):
    mono = MonoDepth(copy.deepcopy(stress_net), *SMALL).eval()
    image = load_photo_tensor("astronaut", *SMALL).half().float()
    with torch.no_grad(), Fp16Storage():
        taps = mono.forward_taps(image)
    for name, value in taps.items():
        assert torch.equal(value, value.half().float()), name
    with torch.no_grad():
        assert not torch.equal(mono(image), taps["depth"])


@pytest.fixture(scope="module")
def small_profile(stress_net):
    return profile(copy.deepcopy(stress_net), "small", *SMALL, RewriteOptions(), "motorcycle_left")


def test_profiler_runs_every_tap_on_the_gpu_in_fp16(small_profile, stress_net):
    taps = small_profile["taps"]
    assert list(taps) == TAPS
    mono = MonoDepth(copy.deepcopy(stress_net), *SMALL).eval()
    with torch.no_grad():  # the taps in PyTorch, run again here on the profile's photo
        reference = mono.forward_taps(load_photo_tensor("motorcycle_left", *SMALL))
    for name, row in taps.items():
        assert row["finite"] is True, name
        assert row["fp32_rel_rms"] <= 1e-2, name  # GPU-FP32 output is this tap's PyTorch value
        assert 0 < row["fp16_rel_rms"] < 0.05, name  # FP16 really ran, and stayed close
        assert row["max_abs"] == pytest.approx(float(reference[name].abs().max()), rel=1e-6), name
    # The input already carries FP16 rounding (about 2^-12 relative); the depth carries more.
    assert 1e-5 < taps["embed"]["fp16_rel_rms"] < taps["depth"]["fp16_rel_rms"]
    # Storing tensors in FP16 costs something; the accelerator's FP16 arithmetic costs more.
    for name, row in taps.items():
        assert 1e-4 < row["floor_rel_rms"] < row["fp16_rel_rms"], name
    # A random error at the embedding is averaged away; one before the last convs is amplified.
    assert taps["embed"]["depth_gain"] < 1 < 3 < taps["upsampled"]["depth_gain"]
    assert taps["depth"]["depth_gain"] is None
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


def test_profiler_names_a_bad_cell_before_any_work():
    result = subprocess.run([sys.executable, "-m", "da3_litert_farm.dev.precision", "small-896-21x9"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert ("precision small-896-21x9: cell 'small-896-21x9' is not in params.yaml's matrix (MODEL-TIER-ASPECT); "
            "configured: ['small-896-9x16', 'small-896-3x4', 'small-896-4x3', 'small-896-16x9']") in result.stderr


def test_profiler_refuses_a_bad_layernorm_shift():
    result = subprocess.run([sys.executable, "-m", "da3_litert_farm.dev.precision", "small-896-9x16", "--layernorm-shift", "-2"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--layernorm-shift: '-2': give an integer K in [1, 12]" in result.stderr


@pytest.fixture(scope="module")
def outlier_profiles():
    """The outlier weights profiled at a small shape: as shipped, and without each FP16 rewrite."""
    net = stress_model(seed=0, outliers=True)
    variants = {"shipped": RewriteOptions(), "no_layernorm_shift": RewriteOptions(layernorm_shift=None),
                "long_output_sums": RewriteOptions(short_output_sums=False)}
    return {name: profile(copy.deepcopy(net), name, *SMALL, options, "motorcycle_left")["taps"]
            for name, options in variants.items()}


def test_prescaled_layernorms_keep_outlier_weights_faithful_in_fp16(outlier_profiles):
    """Why the shipped graph prescales its LayerNorms (the profiler's tables, at a small shape): with
    outliers above 256, the head norm's x*x overflows FP16 where it reads blocks 9 and 11; prescaled
    by 2^-4 it does not, and the depth map is 10x closer to FP32."""
    before, after = outlier_profiles["no_layernorm_shift"], outlier_profiles["shipped"]
    assert before["block09"]["max_abs"] > 256 and before["stage1"]["fp16_one_minus_pearson"] < 1e-4
    assert before["stage2"]["fp16_one_minus_pearson"] > 1e-2  # broken where |x| > 256 enters
    assert after["stage2"]["fp16_one_minus_pearson"] < 1e-4
    assert after["depth"]["fp16_one_minus_pearson"] * 5 < before["depth"]["fp16_one_minus_pearson"]


def test_short_output_sums_pay_on_the_gpu(outlier_profiles):
    """Why the head's last convs are short pairwise sums (rewrites.ShortSumConv2d): they amplify the
    error they make, most on the outlier weights, and the accelerator sums in FP16."""
    long, short = outlier_profiles["long_output_sums"], outlier_profiles["shipped"]
    for name in TAPS[:TAPS.index("upsampled") + 1]:  # the same graph up to there
        assert short[name]["fp16_one_minus_pearson"] == pytest.approx(long[name]["fp16_one_minus_pearson"], rel=0.01)
    assert short["upsampled"]["depth_gain"] > 30  # what reaches the last convs is amplified
    assert short["depth"]["fp16_one_minus_pearson"] * 1.5 < long["depth"]["fp16_one_minus_pearson"]
    # Why 1e-5 is out of reach for this checkpoint: even the official op sequence with exact
    # arithmetic, its tensors stored in FP16, puts the depth above it.
    assert long["depth"]["floor_one_minus_pearson"] > 1e-5


class PatchConv(torch.nn.Module):
    """The patch embedding's conv (14x14 patches of 3 channels: 588 products per output)."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, image):
        return self.conv(image)


class PatchConvByRows(PatchConv):
    """The same function as 14 convs, one per patch row (42 products each), summed pairwise."""

    def forward(self, image):
        w, b, k = self.conv.weight, self.conv.bias, self.conv.kernel_size[0]
        parts = [torch.nn.functional.conv2d(image[:, :, r::k], w[:, :, r:r + 1], b if r == 0 else None, stride=(1, k))
                 for r in range(k)]
        while len(parts) > 1:
            parts = [sum(parts[i:i + 2]) for i in range(0, len(parts), 2)]
        return parts[0]


def _gpu_rel_rms(module, image, modes=("fp16",)) -> dict[str, float]:
    """Relative RMS of each GPU mode against GPU-FP32 for a [1,3,H,W] module, FP16 weights."""
    with tempfile.TemporaryDirectory() as tmp:
        fp32_file, fp16_file = Path(tmp) / "fp32.tflite", Path(tmp) / "fp16.tflite"
        convert_to_tflite(module.eval(), *image.shape[2:], fp32_file)
        quantize_fp16(fp32_file, fp16_file)
        fp32 = GpuModel(fp16_file, "fp32").run_all(image.numpy())[0]
        return {mode: relative_rms(GpuModel(fp16_file, mode).run_all(image.numpy())[0], fp32) for mode in modes}


def test_the_accelerator_sums_in_fp16(stress_net):
    """Why the GPU's FP16 error sits far above the FP16 storage floor from the first op on: the
    accelerator accumulates a conv's products in FP16, so the error grows with the sum's length.
    Splitting the patch conv into 42-product sums cuts its error about 3x (measured 3.6e-3 -> 1.1e-3)
    for 14x its ops; not shipped, since the depth needs about 7x less error on every long sum
    (docs/gpu-fidelity.md: Where FP16 error enters)."""
    conv = MonoDepth(copy.deepcopy(stress_net), *SMALL).patch_embed.proj
    image = load_photo_tensor("motorcycle_left", *SMALL)
    with torch.no_grad():
        assert torch.allclose(PatchConvByRows(conv)(image), conv(image), atol=1e-5)  # the same function
        stored_input = relative_rms(conv(image.half().float()).numpy(), conv(image).numpy())
    whole = _gpu_rel_rms(PatchConv(conv), image, ("fp16", "fp16_fp32_accum"))
    by_rows = _gpu_rel_rms(PatchConvByRows(conv), image)["fp16"]
    assert whole["fp16"] > 5 * stored_input  # more than the FP16 input's rounding: the sum itself
    assert by_rows < whole["fp16"] / 2
    # FP32 accumulation, as an app can ask for it (gpu.litert_capi), leaves about the FP16 input's and
    # output's rounding: stored_input plus 2**-12 of the output at most.
    assert whole["fp16_fp32_accum"] < 2 * stored_input + 2.0 ** -12, (whole, stored_input)
