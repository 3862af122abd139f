"""The model's input preprocessing (`preprocess`, the reference an app mirrors) and the bundled test photos
(numpy, PIL; torch on demand)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from da3_litert_farm.core.photos import MEAN, PHOTOS, SCALE, STD


def load_photo(name: str) -> np.ndarray:
    """An RGB uint8 photo [h, w, 3] bundled with scikit-image."""
    import skimage.data  # imported here: params.py reads PHOTOS and must stay quick to import

    if name == "motorcycle_left":  # Middlebury stereo pair (left view)
        rgb = skimage.data.stereo_motorcycle()[0]
    elif name in PHOTOS:
        rgb = getattr(skimage.data, name)()
    else:
        raise ValueError(f"unknown photo {name!r}; available: {list(PHOTOS)}")
    return np.ascontiguousarray(rgb[..., :3])


def preprocess(rgb: np.ndarray, height: int, width: int) -> np.ndarray:
    """The model's input from an RGB uint8 frame [h, w, 3] of any size: float32 [1, 3, height, width].

    The one implementation of the preprocessing in core.photos.PREPROCESSING, which validation, the GPU
    check and the bundle check feed the model, and which an app's Kotlin, Swift or C++ mirrors
    (docs/app-integration.md). Step by step:

    1. cover: scale s = max(height / h, width / w), so that the image covers height x width with its aspect
       kept; resize to round(w*s) x round(h*s) (at least width x height) with PIL's bicubic filter, which
       widens its kernel by the shrink factor when it shrinks (antialiasing);
    2. centre crop to exactly height x width (top = (new_h - height) // 2, left likewise): never stretched,
       never padded;
    3. x / 255, then (x - mean) / std per channel, ImageNet RGB mean and std;
    4. NCHW: channel planes, with a batch axis of 1.
    """
    return normalize(cover_and_center_crop(rgb, height, width))


def cover_and_center_crop(rgb: np.ndarray, height: int, width: int) -> np.ndarray:
    """Steps 1 and 2 of `preprocess`: uint8 [h, w, 3] -> uint8 [height, width, 3]."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected an RGB uint8 frame [h, w, 3], got {rgb.dtype} {list(rgb.shape)}")
    h, w = rgb.shape[:2]
    scale = max(height / h, width / w)
    # max(): round() may land one pixel short of the target on the covering side
    new_h, new_w = max(height, round(h * scale)), max(width, round(w * scale))
    resized = Image.fromarray(rgb).resize((new_w, new_h), Image.Resampling.BICUBIC)
    top, left = (new_h - height) // 2, (new_w - width) // 2
    return np.asarray(resized)[top : top + height, left : left + width]


def normalize(rgb: np.ndarray) -> np.ndarray:
    """Steps 3 and 4 of `preprocess`: uint8 RGB [H, W, 3] -> float32 NCHW [1, 3, H, W], ImageNet-normalized."""
    x = rgb.astype(np.float32) * SCALE
    x = (x - np.asarray(MEAN, np.float32)) / np.asarray(STD, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def load_photo_array(name: str, height: int, width: int) -> np.ndarray:
    """A bundled photo, preprocessed exactly as the shipped model expects: float32 [1, 3, H, W]."""
    return preprocess(load_photo(name), height, width)


def load_photo_tensor(name: str, height: int, width: int):
    """`load_photo_array` as a torch tensor."""
    import torch

    return torch.from_numpy(load_photo_array(name, height, width))
