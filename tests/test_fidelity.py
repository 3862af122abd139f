"""Fidelity metrics, the preprocessing contract, and the small shipped model vs the official one."""

import numpy as np
import pytest
from PIL import Image

from da3_litert_farm.checks.agreement import compare, worst_case
from da3_litert_farm.checks.fidelity import TFLiteModel, fidelity_per_photo
from da3_litert_farm.core.photos import MEAN, PHOTOS, STD
from da3_litert_farm.model.photo_input import cover_and_center_crop, load_photo, normalize
from tests.conftest import SMALL


def test_compare_metrics():
    ref = np.linspace(1.0, 10.0, 100).reshape(10, 10)
    same = compare(ref, ref)
    assert same["pearson"] == pytest.approx(1.0) and same["cosine"] == pytest.approx(1.0)
    assert same["max_abs_error"] == 0 and same["mean_rel_error"] == 0
    scaled = compare(2 * ref, ref)  # same structure, twice the depth
    assert scaled["pearson"] == pytest.approx(1.0) and scaled["mean_rel_error"] == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    noisy = compare(ref + rng.normal(0, 1, ref.shape), ref)
    assert 0.9 < noisy["pearson"] < 0.99
    with pytest.raises(ValueError, match="shape mismatch"):
        compare(ref, ref[:5])


def test_worst_case_picks_the_least_favourable():
    rows = {"a": {"pearson": 0.99, "cosine": 0.999, "max_abs_error": 0.1, "mean_rel_error": 0.01},
            "b": {"pearson": 0.98, "cosine": 0.9995, "max_abs_error": 0.05, "mean_rel_error": 0.02}}
    assert worst_case(rows) == {"pearson": 0.98, "cosine": 0.999, "max_abs_error": 0.1, "mean_rel_error": 0.02}


def test_photos_are_real_and_bundled():
    # scikit-image's photos at their published sizes (H, W); motorcycle_left is the Middlebury left view
    sizes = {"motorcycle_left": (500, 741), "astronaut": (512, 512), "coffee": (400, 600), "rocket": (427, 640),
             "chelsea": (300, 451)}
    assert set(PHOTOS) == set(sizes)
    for name in PHOTOS:
        rgb = load_photo(name)
        assert rgb.dtype == np.uint8 and rgb.shape == (*sizes[name], 3), name
        assert rgb.std() > 20  # a photograph, not a flat test card


@pytest.mark.parametrize("size", [(896, 504), (504, 896), (126, 224)])
def test_cover_and_center_crop_never_stretches_or_pads(size):
    h, w = size
    rgb = load_photo("motorcycle_left")  # 500 x 741
    out = cover_and_center_crop(rgb, h, w)
    assert out.shape == (h, w, 3)
    scale = max(h / rgb.shape[0], w / rgb.shape[1])
    resized = np.asarray(Image.fromarray(rgb).resize(
        (max(w, round(rgb.shape[1] * scale)), max(h, round(rgb.shape[0] * scale))), Image.Resampling.BICUBIC))
    top, left = (resized.shape[0] - h) // 2, (resized.shape[1] - w) // 2
    np.testing.assert_array_equal(out, resized[top:top + h, left:left + w])
    assert (out.reshape(-1, 3).max(axis=1) > 0).mean() > 0.99  # no black padding bars


def test_normalize_is_imagenet_nchw():
    rgb = np.full((2, 3, 3), 255, np.uint8)
    x = normalize(rgb)
    assert x.shape == (1, 3, 2, 3) and x.dtype == np.float32
    np.testing.assert_allclose(x[0, :, 0, 0], (1 - np.array(MEAN)) / np.array(STD), rtol=1e-6)


def test_small_shipped_model_matches_official(small_tflite, stress_net):
    _, fp16 = small_tflite
    model = TFLiteModel(fp16)
    assert model.input_shape == (1, 3, *SMALL) and model.output_shape == (1, 1, *SMALL)
    per_photo = fidelity_per_photo(stress_net, model, ("motorcycle_left", "astronaut", "coffee"), *SMALL)
    for photo, m in per_photo.items():
        assert m["pearson"] >= 0.99999, (photo, m)
        assert m["mean_rel_error"] < 1e-2, (photo, m)


def test_fidelity_refuses_a_model_of_another_shape(small_tflite, stress_net):
    _, fp16 = small_tflite
    with pytest.raises(ValueError, match=r"model input \(1, 3, 126, 224\) != expected \(1, 3, 224, 126\)"):
        fidelity_per_photo(stress_net, TFLiteModel(fp16), ("astronaut",), 224, 126)
