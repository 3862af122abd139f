"""The shipped file of a cell, with the records that prove it passed every check.

Shared by the stages that gather cells (bundle, catalog): a cell counts only if its
CPU validation and its GPU check passed, at the shape params.yaml gives it, and its file still
has the sha256 that validation, lint and GPU check recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.core.cells import Cell


class NotShippableError(FarmError, RuntimeError):
    """A cell's file is missing, failed a check, or changed since; the message says which."""


@dataclass(frozen=True)
class Shipped:
    cell: Cell
    file: Path
    sha256: str
    metrics: dict  # validate stage: CPU fidelity and gates
    lint: dict  # validate stage: the GPU lint
    gpu: dict  # gpu stage: the GPU accelerator's check (or that it was skipped)

    @property
    def signature(self) -> str:
        """Its signature in its bundle: its aspect's name (a bundle holds one model at one tier)."""
        return self.cell.aspect.name


def verified(cell: Cell) -> Shipped:
    name = cell.name
    try:
        metrics = json.loads(paths.metrics(name).read_text())
        lint = json.loads(paths.lint_report(name).read_text())
    except FileNotFoundError as exc:
        raise NotShippableError(f"cell {name}: not validated yet ({exc.filename} missing)") from None
    if not metrics.get("passed"):
        raise NotShippableError(f"cell {name}: validation failed: {metrics.get('failures')}")
    if (metrics["height"], metrics["width"]) != (cell.height, cell.width):
        raise NotShippableError(f"cell {name}: validated at {metrics['height']}x{metrics['width']}, "
                                f"params say {cell.shape}")
    try:
        gpu = json.loads(paths.gpu_metrics(name).read_text())
    except FileNotFoundError as exc:
        raise NotShippableError(f"cell {name}: not checked on the GPU yet ({exc.filename} missing)") from None
    if not gpu.get("passed"):
        raise NotShippableError(f"cell {name}: GPU check failed: {gpu.get('failures')}")
    shipped = paths.fp16_model(name)
    sha256 = fileio.sha256_file(shipped)
    for what, record in (("validation", metrics), ("GPU lint", lint), ("GPU check", gpu)):
        if sha256 != record.get("sha256"):
            raise NotShippableError(f"cell {name}: {shipped} is not the file its {what} was about (sha256 "
                                    f"{sha256[:12]}... != {str(record.get('sha256'))[:12]}...); run `dvc repro`")
    return Shipped(cell, shipped, sha256, metrics, lint, gpu)
