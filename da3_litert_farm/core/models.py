"""The Depth Anything 3 presets the farm knows: the one place for which it converts and their sizes.

A preset is a name in the `depth_anything_3` package's registry (its configs/*.yaml). The farm
converts the presets whose graph its rewrites cover, two families:
- the any-view series (small, base, large): DINOv2 with RoPE, alternating attention, QK-norm and a camera
  token, under the DualDPT head (depth and ray; the farm keeps depth);
- the monocular series (mono-large, metric-large): a plain DINOv2 ViT-L under the DPT head (depth and
  sky; the farm keeps depth). The two presets share one graph; only their weights and what their
  output means differ (`OUTPUTS`).
The numbers here size the GPU graph's tensors (core.tensor_plan) before anything is built;
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
    repo: str  # its checkpoint on the Hugging Face Hub (params.yaml's checkpoint.repo defaults to it)
    head: str = "dualdpt"  # "dualdpt" (any-view series) | "dpt" (monocular series)
    output: str = "relative"  # a key of OUTPUTS: what the shipped file's output means

    @property
    def largest_weight(self) -> tuple[int, int, int, int]:
        """The head's 3x3 conv resize_layers[3] (O, H, W, I as TFLite stores it): the graph's largest weight."""
        c = self.head_out_channels[-1]
        return (c, 3, 3, c)


PRESETS = {p.name: p for p in (
    Preset("da3-small", embed_dim=384, heads=6, mlp_hidden=1536, head_features=64,
           head_out_channels=(48, 96, 192, 384), repo="depth-anything/DA3-SMALL"),
    Preset("da3-base", embed_dim=768, heads=12, mlp_hidden=3072, head_features=128,
           head_out_channels=(96, 192, 384, 768), repo="depth-anything/DA3-BASE"),
    Preset("da3-large", embed_dim=1024, heads=16, mlp_hidden=4096, head_features=256,
           head_out_channels=(256, 512, 1024, 1024), repo="depth-anything/DA3-LARGE"),
    Preset("da3mono-large", embed_dim=1024, heads=16, mlp_hidden=4096, head_features=256,
           head_out_channels=(256, 512, 1024, 1024), repo="depth-anything/DA3MONO-LARGE", head="dpt"),
    Preset("da3metric-large", embed_dim=1024, heads=16, mlp_hidden=4096, head_features=256,
           head_out_channels=(256, 512, 1024, 1024), repo="depth-anything/DA3METRIC-LARGE", head="dpt",
           output="metric"),
)}
DEFAULT_PRESET = "da3-small"

# The package's other presets, and what their graphs add that the rewrites do not cover yet.
NOT_CONVERTED = {
    "da3-giant": "ViT-G (1.1 B parameters): beyond what the farm's machines export",
    "da3nested-giant-large": "two networks, giant and large, nested",
}


def preset(name: str) -> Preset:
    """The preset called `name`, or a PresetError naming what the farm converts."""
    if name in PRESETS:
        return PRESETS[name]
    why = f" ({NOT_CONVERTED[name]})" if name in NOT_CONVERTED else ""
    raise PresetError(f"preset {name!r} is not one the farm converts{why}; supported: {', '.join(PRESETS)}")


# What a shipped file's output means, per Preset.output: the one place the catalog, every sidecar and
# `farm show` take it from. The monocular series' official `depth` also fills sky pixels (found by its sky
# head) with the 99th percentile of the rest, from a random sample of pixels; the files ship the head's
# depth before that step, which the farm's checks compare against.
METRIC_FOCAL_DIVISOR = 300.0  # depth_anything_3.utils.alignment.apply_metric_scaling's scale_factor
OUTPUTS = {
    "relative": {
        "kind": "relative depth",
        "meaning": "relative depth: the official DA3 `depth` output (exp of the head's depth logit), larger is "
                   "farther; defined up to scale, not metric",
    },
    "metric": {
        "kind": "metric depth",
        "meaning": "metric depth once scaled by the camera: the official DA3 metric `depth` (exp of the head's "
                   "depth logit, before the package's sky fill), which the package turns into metres with "
                   "the camera's focal length (utils/alignment.py, apply_metric_scaling)",
        "metres": {
            "formula": f"metres = output * focal_px / {METRIC_FOCAL_DIVISOR:g}",
            "focal_divisor": METRIC_FOCAL_DIVISOR,
            "focal_px": "the mean of fx and fy in pixels of the model's input: the camera's focal length in "
                        "pixels of its photo, times the scale the photo was resized by to fit the input",
        },
    },
}


def output_entry(model: Preset) -> dict:
    """What the file's output means (catalog `output`, every sidecar, `farm show`)."""
    return {"model": model.name, **OUTPUTS[model.output]}
