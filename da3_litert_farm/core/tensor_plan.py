"""How large the GPU graph's tensors get at a shape, before anything is built: the one place for it.

A WebGPU storage buffer binding is limited (`maxStorageBufferBindingSize`, 128 MiB by default,
and some phone drivers stop there; one report on an Adreno 750 saw silent garbage above it),
and ML Drift keeps each tensor in one buffer. So the largest tensor, in FP16 bytes as the GPU
lays it out (the last axis padded to a multiple of 4, ML Drift's PHWC4 slices), must stay
under a limit (`max_tensor_mib` in params.yaml).

The largest tensors of a DA3 DualDPT model (core.models sizes them per preset), all measured in
DA3-Small's converted graph (tests/test_tensor_plan.py):
- attention scores [1, heads, N, N], N = 1 + tokens: quadratic in the token count. An exact
  rewrite (`rewrites.SplitQKVAttention` with a query chunk) computes them for a slice of the
  queries at a time, so only [1, heads, chunk, N] exists at once;
- the head's full-resolution features [1, H + 2, W + 2, features / 2] (padded) and its last fusion map
  [1, 8h, 8w, features] (h, w the patch grid): linear in pixels, no rewrite bounds them;
- the MLP hidden layer [1, N, 4 x width], and the largest weight (the head's resize_layers[3]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from da3_litert_farm.core.aspects import PATCH
from da3_litert_farm.core.models import Preset

MIB = 1 << 20


def fp16_bytes(shape: tuple[int, ...] | list[int]) -> int:
    """Bytes of a tensor in FP16 as ML Drift stores it: last axis padded to a multiple of 4."""
    if not shape:
        return 2 * 4
    *outer, last = shape
    return 2 * math.prod(outer) * (math.ceil(last / 4) * 4)


@dataclass(frozen=True)
class TensorPlan:
    height: int
    width: int
    tokens: int  # N, including the cls token
    query_chunk: int | None  # None: attention over all queries at once
    shapes: dict[str, tuple[int, ...]]

    @property
    def largest_name(self) -> str:
        return max(self.shapes, key=lambda k: fp16_bytes(self.shapes[k]))

    @property
    def largest_bytes(self) -> int:
        return fp16_bytes(self.shapes[self.largest_name])


def query_chunk_for(tokens: int, heads: int, limit_bytes: int) -> int | None:
    """Queries per attention chunk so that [1, heads, chunk, N] fits the limit; None if all fit.

    Chunks are balanced (ceil(N / n) each), so the last one is not a sliver.
    """
    if fp16_bytes((1, heads, tokens, tokens)) <= limit_bytes:
        return None
    per_query = fp16_bytes((1, heads, 1, tokens))
    most = max(1, limit_bytes // per_query)
    return math.ceil(tokens / math.ceil(tokens / most))


def plan_tensors(model: Preset, height: int, width: int, limit_bytes: int) -> TensorPlan:
    rows, cols = height // PATCH, width // PATCH
    tokens = 1 + rows * cols
    chunk = query_chunk_for(tokens, model.heads, limit_bytes)
    shapes = {
        "attention scores": (1, model.heads, chunk or tokens, tokens),
        # output_conv1's features at full resolution, padded for the 3x3 conv that reads them
        # (rewrites.ShortSumConv2d pads them as a tensor of their own)
        "head features": (1, height + 2, width + 2, model.head_features // 2),
        "head fusion": (1, 8 * rows, 8 * cols, model.head_features),  # refinenet1, at 8x the patch grid
        "MLP hidden": (1, tokens, model.mlp_hidden),
        "weight": model.largest_weight,
    }
    return TensorPlan(height, width, tokens, chunk, shapes)
