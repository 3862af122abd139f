"""`preprocess`, the reference an app mirrors: it is what validation feeds the model, and it agrees with the
preprocessing computed here from its definition (cover, centre crop, /255, ImageNet mean/std, NCHW)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from da3_litert_farm.checks import fidelity
from da3_litert_farm.model.photo_input import load_photo, preprocess

# ImageNet's RGB statistics, as published (not read from the library under test).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])


class RecordingModel:
    """Stands in for the shipped .tflite in validation's fidelity loop and keeps what it was fed."""

    def __init__(self, height: int, width: int):
        self.input_shape, self.fed = (1, 3, height, width), []

    def __call__(self, image: np.ndarray) -> np.ndarray:
        self.fed.append(image.copy())
        return np.linspace(1.0, 2.0, image.shape[2] * image.shape[3], dtype=np.float32).reshape(1, 1, *image.shape[2:])


def test_validation_feeds_the_model_exactly_what_preprocess_returns(monkeypatch):
    height, width = 126, 224
    photos = ("motorcycle_left", "astronaut", "coffee")
    seen_by_official = []

    def official(model, image):  # the official model is not what this test is about
        seen_by_official.append(image.numpy().copy())
        return torch.linspace(1.0, 2.0, height * width).reshape(1, 1, height, width)

    monkeypatch.setattr(fidelity, "official_depth", official)
    model = RecordingModel(height, width)
    fidelity.fidelity_per_photo(None, model, photos, height, width)
    for photo, fed, reference_input in zip(photos, model.fed, seen_by_official):
        expected = preprocess(load_photo(photo), height, width)
        np.testing.assert_array_equal(fed, expected, err_msg=photo)
        np.testing.assert_array_equal(reference_input, expected, err_msg=photo)


def keys_cubic(x: np.ndarray, a: float = -0.5) -> np.ndarray:
    """The bicubic convolution kernel (Keys 1981) with a = -0.5."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = a * (((x - 5) * x + 8) * x - 4)
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def resample_matrix(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] weights of a bicubic resize along one axis: output pixel centres mapped onto input
    pixel centres; when shrinking, the kernel is stretched by the shrink factor (antialiasing); weights
    that fall outside the image are dropped and each row renormalized to sum 1."""
    step = n_in / n_out
    stretch = max(step, 1.0)
    centres = (np.arange(n_out) + 0.5) * step  # in input pixel units, edges at integers
    offsets = (np.arange(n_in)[None, :] + 0.5) - centres[:, None]
    weights = keys_cubic(offsets / stretch)
    return weights / weights.sum(axis=1, keepdims=True)


def from_first_principles(rgb: np.ndarray, height: int, width: int) -> np.ndarray:
    h, w = rgb.shape[:2]
    s = max(height / h, width / w)
    new_h, new_w = max(height, round(h * s)), max(width, round(w * s))
    rows, cols = resample_matrix(h, new_h), resample_matrix(w, new_w)
    # Two separable passes, across then down, each back to 8 bits: the cubic's overshoot at a sharp edge is
    # clipped between them (one float pass instead differs by up to 13 levels at such edges).
    across = np.clip(np.round(rgb.astype(np.float64).transpose(2, 0, 1) @ cols.T), 0, 255)
    resized = np.clip(np.round(rows @ across), 0, 255).transpose(1, 2, 0)
    top, left = (new_h - height) // 2, (new_w - width) // 2
    crop = resized[top:top + height, left:left + width]
    chw = ((crop / 255.0 - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)
    return chw[None]


# PIL rounds its weights to fixed point; the computation above keeps them in float64, so a value may land
# on the other side of a rounding boundary. Tolerance: one level of 255 anywhere (1 / 255 / 0.224 = 0.0175
# after normalization, plus float32 rounding), and such values rare (mean under 0.01 level; measured:
# at most 1 level, 6e-5 to 8e-5 on average).
LEVEL = 1 / 255 / IMAGENET_STD.min()


@pytest.mark.parametrize("photo, shape", [
    ("motorcycle_left", (126, 224)),  # 500 x 741 shrunk to 151 x 224, rows cropped
    ("astronaut", (224, 126)),        # 512 x 512 shrunk to 224 x 224, columns cropped
    ("chelsea", (70, 126)),           # 300 x 451 shrunk about 3.6x
    ("coffee", (504, 896)),           # 400 x 600 enlarged to 597 x 896, as a small camera frame is
])
def test_preprocess_matches_the_definition_on_a_real_photo(photo, shape):
    rgb = load_photo(photo)
    ours = preprocess(rgb, *shape)
    assert ours.shape == (1, 3, *shape) and ours.dtype == np.float32 and ours.flags["C_CONTIGUOUS"]
    diff = np.abs(ours - from_first_principles(rgb, *shape))
    assert diff.max() <= LEVEL + 1e-5, (photo, diff.max() / LEVEL)
    assert diff.mean() <= 0.01 * LEVEL, (photo, diff.mean() / LEVEL)


def test_preprocess_is_the_centre_crop_not_a_stretch():
    # A frame whose left and right thirds are black and middle third white: covering 3:1 -> 1:1 keeps
    # only the middle, so the input is white (the outer columns a little darker: the shrinking kernel
    # reaches past the crop); a stretch would keep the black, a third of the width on each side.
    frame = np.zeros((30, 90, 3), np.uint8)
    frame[:, 30:60] = 255
    x = preprocess(frame, 14, 14)[0]
    white, grey = (1 - IMAGENET_MEAN) / IMAGENET_STD, (0.5 - IMAGENET_MEAN) / IMAGENET_STD
    np.testing.assert_allclose(x[:, :, 2:12], np.broadcast_to(white[:, None, None], (3, 14, 10)), atol=1e-5)
    assert np.all(x > grey[:, None, None])


def test_preprocess_refuses_what_is_not_an_rgb_uint8_frame():
    with pytest.raises(ValueError, match=r"expected an RGB uint8 frame \[h, w, 3\], got float32 \[8, 8, 3\]"):
        preprocess(np.zeros((8, 8, 3), np.float32), 4, 4)
    with pytest.raises(ValueError, match=r"expected an RGB uint8 frame \[h, w, 3\], got uint8 \[8, 8, 4\]"):
        preprocess(np.zeros((8, 8, 4), np.uint8), 4, 4)
