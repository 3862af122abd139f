"""The Depth Anything 3 presets the farm knows: the one place for which it converts and their sizes.

A preset is a name in the `depth_anything_3` package's registry (its configs/*.yaml). The farm
converts the presets whose graph its rewrites cover: DINOv2 with RoPE, alternating attention,
QK-norm and a camera token, under the DualDPT head (small and base differ only in widths). The
numbers here size the GPU graph's tensors (core.tensor_plan) before anything is built;
tests/test_models.py checks each against the official network the package builds.
"""

from __future__ import annotations

from dataclasses import dataclass

from da3_litert_farm.core.errors import FarmError


class PresetError(FarmError, ValueError):
    """A preset the farm does not convert; the message names it and the supported ones."""


@dataclass(frozen=True)
class Preset:
    name: str
    embed_dim: int  # the ViT's token width
    heads: int  # attention heads per block
    mlp_hidden: int  # the MLP's hidden width (4 x embed_dim)
    head_features: int  # the DPT head's fusion width; its last conv before the output runs at half of it
    head_out_channels: tuple[int, ...]  # the DPT head's four reassembled widths; the last is its largest conv

    @property
    def largest_weight(self) -> tuple[int, int, int, int]:
        """The head's 3x3 conv resize_layers[3] (O, H, W, I as TFLite stores it): the graph's largest weight."""
        c = self.head_out_channels[-1]
        return (c, 3, 3, c)


PRESETS = {p.name: p for p in (
    Preset("da3-small", embed_dim=384, heads=6, mlp_hidden=1536, head_features=64,
           head_out_channels=(48, 96, 192, 384)),
    Preset("da3-base", embed_dim=768, heads=12, mlp_hidden=3072, head_features=128,
           head_out_channels=(96, 192, 384, 768)),
)}
DEFAULT_PRESET = "da3-small"

# The package's other presets, and what their graphs add that the rewrites do not cover yet.
NOT_CONVERTED = {
    "da3-large": "ViT-L with the DualDPT head: not yet checked against the rewrites",
    "da3-giant": "ViT-G (1.1 B parameters): beyond what the farm's machines export",
    "da3mono-large": "a plain DINOv2 ViT-L (no RoPE, alternation, QK-norm or camera token) under a single DPT head",
    "da3metric-large": "a plain DINOv2 ViT-L (no RoPE, alternation, QK-norm or camera token) under a single DPT head",
    "da3nested-giant-large": "two networks, giant and large, nested",
}


def preset(name: str) -> Preset:
    """The preset called `name`, or a PresetError naming what the farm converts."""
    if name in PRESETS:
        return PRESETS[name]
    why = f" ({NOT_CONVERTED[name]})" if name in NOT_CONVERTED else ""
    raise PresetError(f"preset {name!r} is not one the farm converts{why}; supported: {', '.join(PRESETS)}")
