"""What the HTP simulator runs for a cell: the shipped file itself, or, where npu.simulate_tier is below the cell's
tier, its proxy (the same model and aspect at that tier, built as the farm builds the cell).

Why a proxy: the simulator takes about 5 minutes per photo at 896x504 on 2 cores and 10-15 s at 224x126, and every
cell would pay it in every build. docs/npu.md ("The simulator's proxy") shows how the proxy's figures follow the full
size's (docs/figures/npu-proxy.json, da3_litert_farm.dev.npu_proxy_study). The shipped binaries of every chip are
still compiled at full size and gated on their partitions; only the numerics are checked at the proxy's shape.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from da3_litert_farm.checks.reference_maps import references
from da3_litert_farm.core import paths
from da3_litert_farm.core.aspects import Shape
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.core.models import PRESETS


@dataclass(frozen=True)
class SimulatedFile:
    """A file to compile for the simulated chips, with what its output is compared with."""
    file: Path  # an FP16 .tflite: the shipped file, or the proxy's
    shape: Shape
    proxy: bool
    refs: dict[str, tuple[np.ndarray, np.ndarray]]  # photo -> (input, official FP32 depth) at `shape`
    cpu: dict[str, np.ndarray]  # photo -> the file's output on the CPU (XNNPACK)


def simulated_file(cell: Cell, simulate_tier: int | None, max_tensor_mib: int, photos: tuple[str, ...],
                   workdir: Path, say=print) -> SimulatedFile:
    """The shipped file with validate@CELL's maps, or the proxy built in `workdir` with the official model's depth at
    its shape (the checkpoint stage's weights)."""
    shape = cell.proxy_shape(simulate_tier)
    if shape is None:
        refs = references(cell, photos)
        with np.load(paths.depth_maps(cell.name)) as maps:
            cpu = {photo: maps[f"{photo}.cpu"] for photo in refs}
        return SimulatedFile(paths.fp16_model(cell.name), cell.shape, False, refs, cpu)
    say(f"building the simulator's proxy: {cell.model} {cell.aspect.name} at {shape} (npu.simulate_tier)")
    import torch  # the proxy alone needs PyTorch and the converter: an NPU stage without one starts in a second

    from da3_litert_farm.checks.fidelity import TFLiteModel
    from da3_litert_farm.convert.export import export_program_file
    from da3_litert_farm.convert.quantize import quantize_fp16
    from da3_litert_farm.model.mono_depth import MonoDepth
    from da3_litert_farm.model.official import official_depth
    from da3_litert_farm.model.patch import export_program, shipped_options
    from da3_litert_farm.model.photo_input import load_photo_array
    from da3_litert_farm.model.weights import load_official_from_dir

    official = load_official_from_dir(paths.checkpoint_dir(cell.model))
    options = shipped_options(PRESETS[cell.preset], shape.height, shape.width, max_tensor_mib)
    program, fp32, fp16 = workdir / "proxy.pt2", workdir / "proxy_fp32.tflite", workdir / "proxy_fp16.tflite"
    # MonoDepth rewrites the network it is given: the reference needs the official one untouched.
    export_program(MonoDepth(copy.deepcopy(official), shape.height, shape.width, options).eval(), program)
    export_program_file(program, fp32)
    quantize_fp16(fp32, fp16)
    cpu_model = TFLiteModel(fp16)
    refs, cpu = {}, {}
    for photo in photos:
        image = load_photo_array(photo, shape.height, shape.width)
        refs[photo] = (image, official_depth(official, torch.from_numpy(image)).numpy())
        cpu[photo] = cpu_model(image)
    return SimulatedFile(fp16, shape, True, refs, cpu)
