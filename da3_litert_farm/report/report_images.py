"""The report's pictures: depth maps and error maps as colour PNGs, and their scale bars.

Depth is relative (larger is farther), so a depth picture only means something next to its
scale: the official map and the shipped model's map of one photo share one range (the official
map's 1st-99th percentile), and the numbers at the ends of the bar are depth values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from PIL import Image


DEPTH_COLORS = "turbo"  # near = blue, far = red
ERROR_COLORS = "inferno"  # no error = black
SCALE_BAR_SIZE = (256, 14)  # W x H pixels


@dataclass(frozen=True)
class Scale:
    """What a picture's colours mean: `low` maps to the bar's left end, `high` to its right."""
    colors: str
    low: float
    high: float


def depth_scale(official: np.ndarray) -> Scale:
    low, high = np.percentile(official, [1, 99])
    return Scale(DEPTH_COLORS, float(low), float(max(high, low + 1e-12)))


def error_scale(error: np.ndarray) -> Scale:
    """From no error to the largest error in the map (so the worst pixel is the brightest)."""
    return Scale(ERROR_COLORS, 0.0, float(max(error.max(), 1e-12)))


def colorize(values: np.ndarray, scale: Scale) -> np.ndarray:
    """A 2-D map -> uint8 RGB [H, W, 3] in the scale's colours, clipped to its range."""
    t = (np.asarray(values, np.float64) - scale.low) / (scale.high - scale.low)
    rgba = colormaps[scale.colors](np.clip(t, 0.0, 1.0), bytes=True)
    return np.ascontiguousarray(rgba[..., :3])


def scale_bar(colors: str) -> np.ndarray:
    """A horizontal gradient of a colormap, left = low, right = high."""
    width, height = SCALE_BAR_SIZE
    ramp = np.tile(np.linspace(0.0, 1.0, width), (height, 1))
    return colorize(ramp, Scale(colors, 0.0, 1.0))


def as_plane(depth: np.ndarray) -> np.ndarray:
    """A model output [1, 1, H, W] (or [H, W]) -> [H, W]."""
    plane = np.squeeze(np.asarray(depth))
    if plane.ndim != 2:
        raise ValueError(f"a depth map must be [1, 1, H, W] or [H, W], got shape {np.shape(depth)}")
    return plane


def write_png(path: Path, rgb: np.ndarray) -> None:
    """Plain write: the report stage builds its images in a folder that replaces the old one whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb).save(path, format="PNG")
