"""Fidelity of a shipped .tflite against the official PyTorch model, on real photos.

Here the .tflite runs in the LiteRT interpreter on the CPU (XNNPACK, FP32 activations); the
GPU stage runs it on the GPU accelerator (da3_litert_farm.checks.gpu). The reference is the official,
unpatched model in FP32. Photos are resized to cover HxW and center-cropped
(da3_litert_farm.core.photos), exactly as an app must feed the model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from ai_edge_litert.interpreter import Interpreter

from da3_litert_farm.checks.agreement import compare
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.photo_input import load_photo_tensor

METRICS = ("pearson", "cosine", "max_abs_error", "mean_rel_error")


class TFLiteModel:
    """A .tflite file in the LiteRT CPU interpreter: one signature (default: the first), one input,
    one output."""

    def __init__(self, path: Path | str, threads: int = 2, signature: str | None = None):
        self.interpreter = Interpreter(model_path=str(path), num_threads=threads)
        signatures = list(self.interpreter.get_signature_list())
        if signature is not None and signature not in signatures:
            raise ValueError(f"{path} has no signature {signature!r}; it has {signatures}")
        self._runner = self.interpreter.get_signature_runner(signature or signatures[0])
        (self._in,), (self._out,) = self._runner.get_input_details().items(), \
            self._runner.get_output_details().items()

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self._in[1]["shape"])

    @property
    def output_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self._out[1]["shape"])

    def __call__(self, image: np.ndarray) -> np.ndarray:
        outputs = self._runner(**{self._in[0]: np.ascontiguousarray(image, np.float32)})
        return outputs[self._out[0]].copy()


def fidelity_per_photo(official: torch.nn.Module, model: TFLiteModel, photos: tuple[str, ...],
                       height: int, width: int, maps: dict | None = None) -> dict[str, dict[str, float]]:
    """Metrics of the .tflite vs the official model, for each photo; into `maps`, if given, the two
    depth maps each photo's metrics were computed from (keys `<photo>.official`, `<photo>.cpu`)."""
    expected = (1, 3, height, width)
    if model.input_shape != expected:
        raise ValueError(f"model input {model.input_shape} != expected {expected}")
    results = {}
    for name in photos:
        image = load_photo_tensor(name, height, width)
        ref = official_depth(official, image).numpy()
        pred = model(image.numpy())
        results[name] = compare(pred, ref)
        if maps is not None:
            maps[f"{name}.official"], maps[f"{name}.cpu"] = ref, pred
    return results


def worst_case(per_photo: dict[str, dict[str, float]]) -> dict[str, float]:
    """The least favourable value of each metric over the photos."""
    rows = per_photo.values()
    return {
        "pearson": min(r["pearson"] for r in rows),
        "cosine": min(r["cosine"] for r in rows),
        "max_abs_error": max(r["max_abs_error"] for r in rows),
        "mean_rel_error": max(r["mean_rel_error"] for r in rows),
    }


def gate_fidelity(per_photo: dict[str, dict[str, float]], min_pearson: float, max_mean_rel: float,
                  keys: tuple[str, str]) -> tuple[dict, list[str]]:
    """Gate every photo on Pearson (shape of the depth map) and mean relative error (its scale
    and offset too: Pearson alone passes a depth map off by a factor). Returns the measured
    outcome of each gate and one failure message per photo and figure; `keys` name the
    params.yaml settings in those messages."""
    failures = []
    for photo, m in per_photo.items():
        if not m["pearson"] >= min_pearson:  # written so that NaN fails
            failures.append(f"pearson {m['pearson']:.7f} on photo {photo!r} < gate {keys[0]} {min_pearson}")
        if not m["mean_rel_error"] <= max_mean_rel:
            failures.append(f"mean relative error {m['mean_rel_error']:.2e} on photo {photo!r} > gate {keys[1]} "
                            f"{max_mean_rel}")
    worst = worst_case(per_photo)
    gates = {
        "min_pearson": {"limit": min_pearson, "value": worst["pearson"],
                        "passed": all(m["pearson"] >= min_pearson for m in per_photo.values())},
        "max_mean_rel": {"limit": max_mean_rel, "value": worst["mean_rel_error"],
                         "passed": all(m["mean_rel_error"] <= max_mean_rel for m in per_photo.values())},
    }
    return gates, failures
