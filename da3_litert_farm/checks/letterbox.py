"""The letterbox penalty: what one square model instead of a model per aspect would cost an
aspect, measured on the official model itself (no conversion involved).

For an aspect H x W with H != W, each validation photo is preprocessed for H x W as an app
does, then padded, centred, into a square S x S with S = max(H, W), with zeros in normalized
space (the dataset mean colour). The official model runs on the square, and its depth is
cropped back to the H x W region. The square has the aspect's long side, so the crop is at the
native scale and needs no resize. That crop is compared with the official model run at H x W
on the same pixels.

DA3's depth is relative (defined up to scale), so the crop is first scaled by the median
ratio of the two maps; Pearson is scale-free anyway. Multiply-accumulates of both forwards
are counted with torch's FlopCounterMode (a MAC is 2 FLOPs).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from da3_litert_farm.checks.agreement import compare
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.photo_input import load_photo_tensor


def letterbox(image: torch.Tensor) -> tuple[torch.Tensor, tuple[slice, slice]]:
    """[1,3,H,W] -> ([1,3,S,S] padded with zeros, the (rows, cols) of the original inside it)."""
    height, width = image.shape[-2:]
    side = max(height, width)
    top, left = (side - height) // 2, (side - width) // 2
    square = torch.zeros(*image.shape[:-2], side, side, dtype=image.dtype)
    region = (slice(top, top + height), slice(left, left + width))
    square[..., region[0], region[1]] = image
    return square, region


# torch counts SDPA's GPU kernels but not the CPU one that runs here: count it the same way.
_CPU_ATTENTION = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu:
                  lambda q, k, v, *args, out_shape=None, **kwargs: sdpa_flop_count(q, k, v)}


def depth_and_macs(model: torch.nn.Module, image: torch.Tensor) -> tuple[np.ndarray, int]:
    with FlopCounterMode(display=False, custom_mapping=_CPU_ATTENTION) as counter:
        depth = official_depth(model, image)
    return depth.numpy(), counter.get_total_flops() // 2


def letterbox_penalty(model: torch.nn.Module, photos: tuple[str, ...], height: int, width: int) -> dict | None:
    """Per photo and worst case, native vs letterboxed square; None for a square aspect."""
    if height == width:
        return None
    per_photo = {}
    for photo in photos:
        native_input = load_photo_tensor(photo, height, width)
        native, native_macs = depth_and_macs(model, native_input)
        square_input, (rows, cols) = letterbox(native_input)
        square, square_macs = depth_and_macs(model, square_input)
        crop = square[..., rows, cols]
        crop = crop * float(np.median(native / crop))
        m = compare(crop, native)
        per_photo[photo] = {"pearson": m["pearson"], "mean_rel_error": m["mean_rel_error"]}
    side = max(height, width)
    return {
        "square": [side, side],
        "pad": "zeros in normalized space (mean colour), centred; depth cropped back at native scale",
        "scale_aligned": "median ratio",
        "pearson_min": min(m["pearson"] for m in per_photo.values()),
        "mean_rel_error_max": max(m["mean_rel_error"] for m in per_photo.values()),
        "macs_native": native_macs,
        "macs_square": square_macs,
        "mac_ratio_square_to_native": square_macs / native_macs,
        "photos": per_photo,
    }
