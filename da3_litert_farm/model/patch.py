"""Patch stage: official model -> GPU-clean monocular-depth program for one aspect.

Run by the DVC stage in stages/patch.py.

Builds `MonoDepth` (da3_litert_farm.model.mono_depth) from the checkpoint at the aspect's shape, checks
it against the official model on a real photo (the rewrites must be exact), and saves
the torch.export program that the export stage converts.
"""

from __future__ import annotations


import torch

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import fileio
from da3_litert_farm.core.models import Preset
from da3_litert_farm.core.tensor_plan import MIB, plan_tensors
from da3_litert_farm.core.photos import CHECK_PHOTO
from da3_litert_farm.model.mono_depth import MonoDepth, RewriteOptions
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.photo_input import load_photo_tensor

# The patched module must match the official one to this fraction of the depth range.
MAX_RELATIVE_ERROR = 1e-4


class NotExactError(FarmError, RuntimeError):
    pass


def patch_model(official: torch.nn.Module, height: int, width: int,
                options: RewriteOptions = RewriteOptions()) -> tuple[MonoDepth, dict]:
    """MonoDepth from `official` (consumed), with its measured error vs the official model."""
    image = load_photo_tensor(CHECK_PHOTO, height, width)
    reference = official_depth(official, image)
    mono = MonoDepth(official, height, width, options).eval()
    with torch.no_grad():
        patched = mono(image)
    max_abs = float((patched - reference).abs().max())
    depth_range = float(reference.max() - reference.min())
    report = {
        "height": height,
        "width": width,
        "rewrites": options.__dict__,
        "check_photo": CHECK_PHOTO,
        "max_abs_error": max_abs,
        "relative_error": max_abs / depth_range,
        "gate_relative_error": MAX_RELATIVE_ERROR,
    }
    if not report["relative_error"] <= MAX_RELATIVE_ERROR:
        raise NotExactError(
            f"patched model differs from the official one by {report['relative_error']:.2e} of the depth "
            f"range at {height}x{width} (gate {MAX_RELATIVE_ERROR:.0e}): a rewrite is not exact"
        )
    return mono, report


def shipped_options(model: Preset, height: int, width: int, max_tensor_mib: int) -> RewriteOptions:
    """The rewrites of a shipped model: all of them, attention chunked where its scores would
    exceed the largest GPU tensor allowed."""
    return RewriteOptions(attention_query_chunk=plan_tensors(model, height, width, max_tensor_mib * MIB).query_chunk)


def export_program(mono: MonoDepth, path) -> None:
    """Trace the patched module with torch.export and save it atomically."""
    sample = torch.zeros(1, 3, mono.height, mono.width)
    program = torch.export.export(mono, (sample,))
    with fileio.atomic_path(path) as tmp:
        torch.export.save(program, tmp)
