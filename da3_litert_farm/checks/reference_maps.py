"""The reference a device check compares with: the official FP32 model's depth maps that validate@CELL saved
(depth.npz), beside each photo's input as an app preprocesses it."""

from __future__ import annotations

import numpy as np

from da3_litert_farm.core import paths
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.model.photo_input import load_photo_array


class MissingReferenceError(FarmError, RuntimeError):
    """validate@CELL has not saved the maps a check needs; the message says what to run."""


def references(aspect: Cell, photos: tuple[str, ...]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(input, official FP32 depth) per photo: the official maps validate@CELL saved, which the GPU and NPU checks
    compare with, so neither needs PyTorch."""
    maps_file = paths.depth_maps(aspect.name)
    try:
        maps = np.load(maps_file)
    except FileNotFoundError:
        raise MissingReferenceError(f"{maps_file} is missing: run `dvc repro validate@{aspect.name}` first") from None
    with maps:
        missing = [p for p in photos if f"{p}.official" not in maps.files]
        if missing:
            raise MissingReferenceError(f"{maps_file} has no official depth map of {missing} (validation.gpu_photos "
                                        f"must be among validation.photos); run `dvc repro validate@{aspect.name}`")
        return {p: (load_photo_array(p, aspect.height, aspect.width), maps[f"{p}.official"]) for p in photos}
