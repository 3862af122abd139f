"""Seeded "stress" weights for the DA3 presets: random, but shaped so that fidelity checks mean something.

Plain random init hides conversion bugs: LayerScale starts as a constant, pos_embed near zero,
and the depth output is almost flat, so any correlation is meaningless. The stress init
randomizes what a default init leaves degenerate and scales the depth logits so that depth
spans about one decade across a real photo.

With `outliers=True` it also plants what makes DINOv2-family ViTs hard for FP16: a few
residual-stream channels that grow to several hundred on every token ("outlier" or
"massive" activations), with small LayerNorm gains on them, as trained DINOv2 models learn.
There LayerNorm's x*x exceeds FP16's largest value (65504, about 256^2) and long FP16 sums
lose digits, so a graph that passes on plain stress weights can still return NaN or a
wrong depth on a phone.
"""

from __future__ import annotations

import math

import torch

from da3_litert_farm.core.photos import CHECK_PHOTO
from da3_litert_farm.model.official import build_official, official_depth
from da3_litert_farm.model.photo_input import load_photo_tensor

# Aim: log(depth) spans ln(10) between the 1st and 99th percentile of one photo.
DEPTH_LOG_SPAN = math.log(10.0)
_CALIBRATION_SHAPE = (126, 224)

# The planted outliers: channel -> the value the residual stream reaches there after the
# last block (one positive, one negative). The stream grows by equal steps from
# OUTLIER_FIRST_BLOCK on, through each block's MLP output bias; every LayerNorm that reads
# the stream gets gain OUTLIER_NORM_GAIN on these channels.
OUTLIERS = {37: 400.0, 250: -300.0}
OUTLIER_FIRST_BLOCK = 2
OUTLIER_NORM_GAIN = 1 / 16


@torch.no_grad()
def stress_model(seed: int, model_name: str = "da3-small", outliers: bool = False) -> torch.nn.Module:
    """The official model with deterministic stress weights for `seed` (and `outliers`)."""
    torch.manual_seed(seed)
    return stress_init(build_official(model_name), seed, outliers)


@torch.no_grad()
def stress_init(model: torch.nn.Module, seed: int, outliers: bool = False) -> torch.nn.Module:
    """`model`, an official DA3 network, given stress weights for `seed` in place (tests also give them to
    shrunk networks of a preset's structure)."""
    gen = torch.Generator().manual_seed(seed)

    def randn(shape, scale):
        return torch.randn(shape, generator=gen) * scale

    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "gamma":  # LayerScale: per-channel, positive, spread over a decade
            p.copy_(torch.exp(randn(p.shape, 0.6)) * 0.3)
        elif leaf in ("pos_embed", "cls_token", "camera_token"):
            p.copy_(randn(p.shape, 0.5))
        elif ".norm" in name or "_norm" in name or name.startswith("head.norm"):
            # LayerNorm affine: away from (1, 0) so a dropped or misplaced norm shows.
            p.copy_(1.0 + randn(p.shape, 0.2) if leaf == "weight" else randn(p.shape, 0.1))

    if outliers:
        plant_outliers(model)
    _calibrate_depth_span(model)
    return model


@torch.no_grad()
def plant_outliers(model: torch.nn.Module) -> None:
    """Make the OUTLIERS channels of the backbone's residual stream reach their values."""
    vit = model.backbone.pretrained
    blocks = vit.blocks[OUTLIER_FIRST_BLOCK:]
    channels = torch.tensor(list(OUTLIERS))
    step = torch.tensor(list(OUTLIERS.values())) / len(blocks)
    for block in blocks:
        # The MLP output is scaled by LayerScale's gamma before it joins the stream.
        block.mlp.fc2.bias[channels] += step / block.ls2.gamma[channels]
    dim = vit.embed_dim
    for block in vit.blocks:
        block.norm1.weight[channels] = OUTLIER_NORM_GAIN
        block.norm2.weight[channels] = OUTLIER_NORM_GAIN
    vit.norm.weight[channels] = OUTLIER_NORM_GAIN
    if isinstance(model.head.norm, torch.nn.LayerNorm):  # DualDPT's; DPT's is the identity
        # It reads cat(raw stream of a local block, normed stream): both halves.
        model.head.norm.weight[torch.cat((channels, channels + dim))] = OUTLIER_NORM_GAIN


@torch.no_grad()
def _calibrate_depth_span(model: torch.nn.Module) -> None:
    """Scale the depth channel of the last head conv so depth spans about a decade."""
    last = model.head.scratch.output_conv2[-1]  # Conv2d(32, 2 or 1, 1): channel 0 = depth logit
    image = load_photo_tensor(CHECK_PHOTO, *_CALIBRATION_SHAPE)
    log_depth = official_depth(model, image).log().flatten()
    lo, hi = torch.quantile(log_depth, torch.tensor([0.01, 0.99]))
    span = float(hi - lo)
    if span <= 0:
        raise RuntimeError("stress init produced a constant depth map")
    scale = DEPTH_LOG_SPAN / span
    last.weight[0].mul_(scale)
    last.bias[0].mul_(scale)
    # Centre log-depth near 0 so depth lies around 1 (as metric-free relative depth would).
    centre = float(log_depth.median()) * scale
    last.bias[0].sub_(centre)
