"""What FP16 costs this network in principle, in PyTorch: the precision profiler's reference
columns next to what the GPU accelerator measured.

Per tap of `MonoDepth.forward_taps`, against the exact FP32 computation with the same FP16
weights (the shipped file's):
- the storage floor: every PyTorch op's result rounded to FP16, its arithmetic exact. A GPU
  that keeps this graph's tensors in FP16 pays about this much even if it computed each op
  exactly. (The delegate fuses some elementwise ops, skipping a rounding, so it is a close
  estimate, not a strict bound; a rewrite that stores more tensors raises it.)
- the depth gain: a small random error at that tap (relative RMS NOISE, independent per
  element), carried exactly to the output: 1 - r at the depth / 1 - r at the tap. Below 1 the
  rest of the network averages an error away; above 1 it amplifies it.
"""

from __future__ import annotations

import copy

import torch
from torch.overrides import TorchFunctionMode

from da3_litert_farm.checks.agreement import compare, relative_rms

NOISE = 1e-3  # relative RMS of the error planted at a tap: small, far above FP32 rounding


def _to_fp16(value):
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
        return value.half().float()
    if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_to_fp16(v) for v in value)
    return value


class Fp16Storage(TorchFunctionMode):
    """Round every op's float32 result to FP16: FP16 storage between ops, exact arithmetic."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return _to_fp16(func(*args, **(kwargs or {})))


def with_fp16_weights(mono: torch.nn.Module) -> torch.nn.Module:
    """A copy of `mono` whose parameters and buffers are rounded to FP16, as in the shipped file."""
    mono = copy.deepcopy(mono)
    with torch.no_grad():
        for tensor in list(mono.parameters()) + list(mono.buffers()):
            if tensor.dtype == torch.float32:
                tensor.copy_(_to_fp16(tensor))
    return mono


def tap_modules(mono) -> dict[str, torch.nn.Module]:
    """The module whose output is each tap, in tap order; `depth` (the final exp) has none.
    `embed` is the patch embedding's output, before the cls token and position table join it."""
    s = mono.scratch
    modules = {"embed": mono.patch_embed}
    modules.update({f"block{i:02d}": block for i, block in enumerate(mono.blocks)})
    modules.update({f"stage{i}": layer for i, layer in enumerate(mono.resize_layers)})
    modules.update({f"refine{i}": getattr(s, f"refinenet{i}") for i in (4, 3, 2, 1)})
    modules.update(output_conv1=s.output_conv1, upsampled=mono.output_pos_embed, logit=s.output_conv2)
    return modules


@torch.no_grad()
def analyse(mono, image: torch.Tensor) -> dict[str, dict]:
    """Per tap: the FP16 storage floor (1 - r, relative RMS) and the depth gain (None for depth)."""
    mono = with_fp16_weights(mono)
    exact = mono.forward_taps(image)
    with Fp16Storage():
        stored = mono.forward_taps(_to_fp16(image))
    rows = {name: {"floor_one_minus_pearson": 1 - compare(stored[name].numpy(), ref.numpy())["pearson"],
                   "floor_rel_rms": relative_rms(stored[name].numpy(), ref.numpy()),
                   "depth_gain": None}
            for name, ref in exact.items()}
    depth = exact["depth"].numpy()
    for name, module in tap_modules(mono).items():
        generator = torch.Generator().manual_seed(0)
        at_tap = {}

        def plant(_module, _inputs, out):
            noisy = out + torch.randn(out.shape, generator=generator) * NOISE * out.pow(2).mean().sqrt()
            at_tap["one_minus_pearson"] = 1 - compare(noisy.numpy(), out.numpy())["pearson"]
            return noisy

        handle = module.register_forward_hook(plant)
        try:
            noisy_depth = mono(image).numpy()
        finally:
            handle.remove()
        rows[name]["depth_gain"] = (1 - compare(noisy_depth, depth)["pearson"]) / at_tap["one_minus_pearson"]
    return rows
