"""The GPU check says what runs as it runs (each mode's load, each photo's start and end): on a software adapter it
runs for minutes. A fake GpuModel stands in for LiteRT here; tests/test_gpu.py runs the real one."""

from __future__ import annotations

import numpy as np

from da3_litert_farm.checks import gpu
from da3_litert_farm.gpu.gpu_runtime import Adapter


class FakeModel:
    def __init__(self, path, mode):
        self.adapter = Adapter("llvmpipe", "Vulkan", "CPU / Software")
        self.fully_accelerated, self.rejected_ops, self.precision = True, [], mode

    def __call__(self, image):
        return image[:, :1] * 2 + 1


def test_each_mode_and_photo_is_said_as_it_runs(monkeypatch):
    monkeypatch.setattr(gpu, "GpuModel", FakeModel)
    image = np.random.default_rng(0).random((1, 3, 4, 6), np.float32)
    refs = {"coffee": (image, image[:, :1] * 2 + 1), "astronaut": (image, image[:, :1] * 2 + 1)}
    said = []
    record, _ = gpu.run_on_gpu("m.tflite", refs, 0.99, 0.05, ("fp16", "fp32"), say=said.append)
    assert record["passed"], record["failures"]
    assert [line.split(" in ")[0] for line in said] == [
        "fp16: loading m.tflite on the GPU accelerator", "fp16: loaded on llvmpipe (Vulkan, CPU / Software)",
        "fp16: photo 'coffee' (1 of 2) running", "fp16: photo 'coffee' done",
        "fp16: photo 'astronaut' (2 of 2) running", "fp16: photo 'astronaut' done",
        "fp32: loading m.tflite on the GPU accelerator", "fp32: loaded on llvmpipe (Vulkan, CPU / Software)",
        "fp32: photo 'coffee' (1 of 2) running", "fp32: photo 'coffee' done",
        "fp32: photo 'astronaut' (2 of 2) running", "fp32: photo 'astronaut' done"]
