"""Real test photos and the model's input preprocessing (the one place both are defined).

The preprocessing here is what the catalog publishes to app teams: resize so the image
covers HxW (aspect kept), center-crop to exactly HxW, scale to [0,1], ImageNet mean/std,
NCHW float32. Never stretched, never padded: DA3 sees the image at its native aspect.
"""

from __future__ import annotations

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SCALE = 1.0 / 255.0
RESAMPLE = "bicubic"

# Photographs bundled with scikit-image (no download): varied scenes, sizes and aspects.
PHOTOS = ("motorcycle_left", "astronaut", "coffee", "rocket", "chelsea")
MIN_PHOTOS = 3  # validation.photos: fewer is not a fidelity figure
# Where one photo is enough: the patch stage's exactness check, the stress weights' depth calibration.
CHECK_PHOTO = "motorcycle_left"

PREPROCESSING = {
    "resize": f"scale so the image covers HxW, aspect kept ({RESAMPLE})",
    "crop": "center crop to HxW",
    "scale": SCALE,
    "mean": list(MEAN),
    "std": list(STD),
    "channel_order": "RGB",
}
