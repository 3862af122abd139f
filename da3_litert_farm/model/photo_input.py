"""The bundled test photos, loaded and preprocessed as core.photos defines (numpy, PIL; torch on demand)."""

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


def cover_and_center_crop(rgb: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize so the image covers height x width (aspect kept), then center-crop to it."""
    h, w = rgb.shape[:2]
    scale = max(height / h, width / w)
    new_h, new_w = max(height, round(h * scale)), max(width, round(w * scale))
    resized = Image.fromarray(rgb).resize((new_w, new_h), Image.Resampling.BICUBIC)
    top, left = (new_h - height) // 2, (new_w - width) // 2
    return np.asarray(resized)[top : top + height, left : left + width]


def normalize(rgb: np.ndarray) -> np.ndarray:
    """uint8 RGB [H, W, 3] -> float32 NCHW [1, 3, H, W], ImageNet-normalized."""
    x = rgb.astype(np.float32) * SCALE
    x = (x - np.asarray(MEAN, np.float32)) / np.asarray(STD, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def load_photo_array(name: str, height: int, width: int) -> np.ndarray:
    """A bundled photo, preprocessed exactly as the shipped model expects: float32 [1, 3, H, W]."""
    return normalize(cover_and_center_crop(load_photo(name), height, width))


def load_photo_tensor(name: str, height: int, width: int):
    """`load_photo_array` as a torch tensor."""
    import torch

    return torch.from_numpy(load_photo_array(name, height, width))
