"""Real test photos and the model's input preprocessing (the one place both are defined).

The preprocessing here is what the catalog publishes to app teams: resize so the image
covers HxW (aspect kept), center-crop to exactly HxW, scale to [0,1], ImageNet mean/std,
NCHW float32. Never stretched, never padded: DA3 sees the image at its native aspect.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SCALE = 1.0 / 255.0
RESAMPLE = "bicubic"

# Photographs bundled with scikit-image (no download): varied scenes, sizes and aspects.
PHOTOS = ("motorcycle_left", "astronaut", "coffee", "rocket", "chelsea")

PREPROCESSING = {
    "resize": f"scale so the image covers HxW, aspect kept ({RESAMPLE})",
    "crop": "center crop to HxW",
    "scale": SCALE,
    "mean": list(MEAN),
    "std": list(STD),
    "channel_order": "RGB",
}


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


def load_photo_tensor(name: str, height: int, width: int):
    """A bundled photo, preprocessed exactly as the shipped model expects, as a torch tensor."""
    import torch

    return torch.from_numpy(normalize(cover_and_center_crop(load_photo(name), height, width)))
