"""The monocular series (da3mono-large, da3metric-large: a plain DINOv2 under the DPT head): converted GPU-clean
and exact, checked on the CPU and on LiteRT's GPU accelerator, and the metric preset's output turned into metres
by the formula the catalog and every sidecar state, against the official package's own conversion.

The real ViT-L takes a minute and 9 GB to export even at a tiny shape (measured), so the files here are converted
from a shrunk network of the same structure: the presets' own config (DPT head, no RoPE, alternation, QK-norm,
camera token or token concatenation) with the ViT-S backbone and small-sized head widths. The real presets'
exactness is checked in tests/test_models.py.
"""

import copy

import numpy as np
import pytest
import torch
from depth_anything_3.cfg import create_object, load_config
from depth_anything_3.registry import MODEL_REGISTRY
from depth_anything_3.utils.alignment import apply_metric_scaling

from da3_litert_farm.checks.agreement import compare
from da3_litert_farm.checks.fidelity import TFLiteModel, fidelity_per_photo
from da3_litert_farm.checks.gpu import run_on_gpu
from da3_litert_farm.checks.gpu_lint import lint
from da3_litert_farm.config.params import load_params
from da3_litert_farm.convert.export import convert_to_tflite
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.core.models import PRESETS, output_entry
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.patch import patch_model
from da3_litert_farm.model.photo_input import load_photo_tensor
from da3_litert_farm.model.stress import stress_init
from tests.conftest import SMALL

DEFAULTS = load_params().validation
PHOTOS = ("motorcycle_left", "astronaut", "coffee")


def shrunk_monocular_net(seed: int = 0) -> torch.nn.Module:
    """da3metric-large's config (the same as da3mono-large's) with a ViT-S backbone and DA3-Small's head widths."""
    config = load_config(MODEL_REGISTRY["da3metric-large"])
    config.net.name, config.net.out_layers = "vits", [2, 5, 8, 11]
    config.head.dim_in, config.head.features, config.head.out_channels = 384, 64, [48, 96, 192, 384]
    torch.manual_seed(seed)
    return stress_init(create_object(config).eval(), seed, outliers=True)


@pytest.fixture(scope="module")
def monocular(tmp_path_factory):
    """(the official shrunk net, its FP32 .tflite, its FP16 .tflite) at SMALL."""
    official = shrunk_monocular_net()
    mono, report = patch_model(copy.deepcopy(official), *SMALL)
    assert report["relative_error"] < 1e-5, report
    out = tmp_path_factory.mktemp("monocular")
    fp32, fp16 = out / "fp32.tflite", out / "fp16.tflite"
    convert_to_tflite(mono, *SMALL, fp32)
    quantize_fp16(fp32, fp16)
    return official, fp32, fp16


def test_the_structure_is_the_monocular_presets(monocular):
    official = monocular[0]
    vit, real = official.backbone.pretrained, load_config(MODEL_REGISTRY["da3mono-large"])
    assert type(official.head).__name__ == "DPT" and official.head.use_sky_head and not official.head.pos_embed
    assert (vit.rope, vit.alt_start, vit.cat_token) == (None, -1, False)
    assert (real.net.alt_start, real.net.rope_start, real.net.qknorm_start, real.net.cat_token) == (-1, -1, -1, False)
    assert real.head.__object__.name == "DPT" and real == load_config(MODEL_REGISTRY["da3metric-large"])


def test_the_reference_is_the_heads_depth_without_the_random_sky_fill(monocular):
    """The package's forward ends by filling sky pixels from a random sample of the rest; the reference the farm
    checks against is the depth before it, the same on every call, and the net is left as it was."""
    official = copy.deepcopy(monocular[0])
    image = load_photo_tensor("astronaut", *SMALL)
    first = official_depth(official, image)
    # Stress weights see no sky; move the sky head's threshold into the middle of what it returns on this photo.
    with torch.no_grad():
        sky_score = official(image.unsqueeze(1))["sky"]
        official.head.scratch.sky_output_conv2[-1].bias += 0.3 - float(sky_score.median())
        full = official(image.unsqueeze(1))
    assert torch.equal(official_depth(official, image), first) and official.head.use_sky_head
    sky = full["sky"].reshape(first.shape) >= 0.3  # the package's compute_sky_mask, negated
    assert 0.2 < float(sky.float().mean()) < 0.8
    filled = full["depth"].reshape(first.shape)
    # Outside the sky the package's depth is the reference; inside, the fill replaced it.
    assert torch.equal(filled[~sky], first[~sky]) and not torch.equal(filled[sky], first[sky])


def test_the_file_is_gpu_clean_and_passes_the_shipped_gates_on_cpu_and_gpu(monocular):
    official, _, fp16 = monocular
    report = lint(fp16, require_fp16=True, max_tensor_bytes=128 << 20)
    assert report.ok and report.max_rank <= 4 and report.all_weights_fp16, report.problems
    assert "TRANSPOSE_CONV" not in report.op_histogram and "GATHER" not in report.op_histogram
    cpu = fidelity_per_photo(official, TFLiteModel(fp16), PHOTOS, *SMALL)
    assert min(m["pearson"] for m in cpu.values()) >= DEFAULTS.min_pearson, cpu
    assert max(m["mean_rel_error"] for m in cpu.values()) <= DEFAULTS.max_mean_rel, cpu
    refs = {}
    for photo in ("coffee",):
        image = load_photo_tensor(photo, *SMALL)
        refs[photo] = (image.numpy(), official_depth(official, image).numpy())
    record, depths = run_on_gpu(fp16, refs, DEFAULTS.gpu_min_pearson, DEFAULTS.gpu_max_mean_rel)
    assert record["fully_accelerated"] and record["passed"], record["failures"]
    assert record["precision"] == "fp16" and set(depths) == {"coffee"}


def test_the_stated_formula_gives_the_packages_metres_from_the_files_output(monocular):
    """What the catalog and every sidecar tell an app (core.models.OUTPUTS), applied to the .tflite's output,
    against depth_anything_3.utils.alignment.apply_metric_scaling on the official output."""
    official, fp32, _ = monocular
    output = output_entry(PRESETS["da3metric-large"])
    assert output["kind"] == "metric depth" and "focal_px" in output["metres"]["formula"]
    divisor = output["metres"]["focal_divisor"]
    height, width = SMALL
    # A 4032x3024 photo from a camera with fx 3100, fy 3000 px, resized to the input's width.
    scale = width / 4032
    fx, fy = 3100 * scale, 3000 * scale
    intrinsics = torch.tensor([[fx, 0, width / 2], [0, fy, height / 2], [0, 0, 1]], dtype=torch.float32)[None, None]
    image = load_photo_tensor("coffee", height, width)
    expected = apply_metric_scaling(official_depth(official, image)[:, 0][:, None], intrinsics)[0, 0].numpy()
    raw = TFLiteModel(fp32)(image.numpy())[0, 0]
    metres = raw * ((fx + fy) / 2 / divisor)
    agreement = compare(metres, expected)
    assert agreement["mean_rel_error"] < 1e-4 and agreement["pearson"] > 0.99999, agreement
    assert abs(float(np.median(metres / expected)) - 1) < 1e-4
    # The unscaled output is not metres: at this focal length it is off by a factor of focal / divisor.
    assert abs(float(np.median(raw / expected)) - divisor / ((fx + fy) / 2)) < 1e-3 * divisor / ((fx + fy) / 2)
