"""Fidelity of a shipped .tflite against the official PyTorch model, on real photos.

Here the .tflite runs in the LiteRT interpreter on the CPU (XNNPACK, FP32 activations); the
GPU stage runs it on the GPU accelerator (da3_litert_farm.checks.gpu). The reference is the official,
unpatched model in FP32. Photos are resized to cover HxW and center-cropped
(da3_litert_farm.core.photos), exactly as an app must feed the model.
"""

from __future__ import annotations

import statistics
import time
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


def inference_ms(model: TFLiteModel, image: np.ndarray, runs: int = 3) -> float:
    """What one inference costs on the CPU (LiteRT's XNNPACK, the model's threads): the median wall time of
    `runs` inferences, after one that warms the interpreter up (its first run prepares XNNPACK)."""
    model(image)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        model(image)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)
