"""Patch stage: official model -> GPU-clean monocular-depth program for one aspect.

    python -m da3_litert_farm.patch 9x16

Builds `MonoDepth` (da3_litert_farm.mono_depth) from the checkpoint at the aspect's shape, checks
it against the official model on a real photo (the rewrites must be exact), and saves
the torch.export program that the export stage converts.
"""

from __future__ import annotations

import sys
import time

import torch

from da3_litert_farm import fileio, paths
from da3_litert_farm.gpu_memory import MIB, plan_tensors
from da3_litert_farm.weights import load_official_from_dir
from da3_litert_farm.mono_depth import MonoDepth, RewriteOptions
from da3_litert_farm.official import CheckpointError, official_depth
from da3_litert_farm.params import ParamsError, stage_aspect
from da3_litert_farm.photos import load_photo_tensor

# The patched module must match the official one to this fraction of the depth range.
MAX_RELATIVE_ERROR = 1e-4
CHECK_PHOTO = "motorcycle_left"


class NotExactError(RuntimeError):
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


def shipped_options(height: int, width: int, max_tensor_mib: int) -> RewriteOptions:
    """The rewrites of a shipped model: all of them, attention chunked where its scores would
    exceed the largest GPU tensor allowed."""
    return RewriteOptions(attention_query_chunk=plan_tensors(height, width, max_tensor_mib * MIB).query_chunk)


def export_program(mono: MonoDepth, path) -> None:
    """Trace the patched module with torch.export and save it atomically."""
    sample = torch.zeros(1, 3, mono.height, mono.width)
    program = torch.export.export(mono, (sample,))
    with fileio.atomic_path(path) as tmp:
        torch.export.save(program, tmp)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    started = time.time()
    try:
        params, aspect = stage_aspect("patch", argv)
        options = shipped_options(aspect.height, aspect.width, params.max_tensor_mib)
        official = load_official_from_dir(paths.CHECKPOINT_DIR)
        mono, report = patch_model(official, aspect.height, aspect.width, options)
        export_program(mono, paths.patched_program(aspect.name))
        fileio.write_json(paths.patch_report(aspect.name),
                          {"aspect": aspect.name, **report, "seconds": time.time() - started})
    except (ParamsError, CheckpointError, NotExactError) as exc:
        print(f"patch: {exc}", file=sys.stderr)
        return 1
    chunk = options.attention_query_chunk
    chunking = f", attention in chunks of {chunk} queries" if chunk else ""
    print(f"patch {aspect.name}: {aspect.shape} exact to {report['relative_error']:.1e} of the depth range"
          f"{chunking} ({time.time() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
