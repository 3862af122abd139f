"""Fidelity of a shipped .tflite against the official PyTorch model, on real photos.

The .tflite runs in the LiteRT interpreter on the CPU (XNNPACK); the reference is the
official, unpatched model in FP32. Photos are resized to cover HxW and center-cropped
(stages.photos), exactly as an app must feed the model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from ai_edge_litert.interpreter import Interpreter

from stages.official import official_depth
from stages.photos import load_photo_tensor

METRICS = ("pearson", "cosine", "max_abs_error", "mean_rel_error")


def compare(pred: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Agreement of a depth map with the reference (float64 math)."""
    p = np.asarray(pred, np.float64).ravel()
    r = np.asarray(ref, np.float64).ravel()
    if p.shape != r.shape:
        raise ValueError(f"shape mismatch: {pred.shape} vs {ref.shape}")
    pc, rc = p - p.mean(), r - r.mean()
    return {
        "pearson": float(pc @ rc / np.sqrt((pc @ pc) * (rc @ rc))),
        "cosine": float(p @ r / np.sqrt((p @ p) * (r @ r))),
        "max_abs_error": float(np.abs(p - r).max()),
        "mean_rel_error": float(np.mean(np.abs(p - r) / np.maximum(np.abs(r), 1e-12))),
    }


class TFLiteModel:
    """A .tflite file in the LiteRT CPU interpreter; one input, one output."""

    def __init__(self, path: Path | str, threads: int = 2):
        self.interpreter = Interpreter(model_path=str(path), num_threads=threads)
        self.interpreter.allocate_tensors()
        (self._in,), (self._out,) = self.interpreter.get_input_details(), self.interpreter.get_output_details()

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self._in["shape"])

    @property
    def output_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self._out["shape"])

    def __call__(self, image: np.ndarray) -> np.ndarray:
        self.interpreter.set_tensor(self._in["index"], np.ascontiguousarray(image, np.float32))
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self._out["index"]).copy()


def fidelity_per_photo(official: torch.nn.Module, model: TFLiteModel, photos: tuple[str, ...],
                       height: int, width: int) -> dict[str, dict[str, float]]:
    """Metrics of the .tflite vs the official model, for each photo."""
    expected = (1, 3, height, width)
    if model.input_shape != expected:
        raise ValueError(f"model input {model.input_shape} != expected {expected}")
    results = {}
    for name in photos:
        image = load_photo_tensor(name, height, width)
        ref = official_depth(official, image).numpy()
        results[name] = compare(model(image.numpy()), ref)
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
