"""The shipped file of an aspect, with the records that prove it passed every check.

Shared by the stages that gather every aspect (bundle, catalog): an aspect counts only if its
CPU validation and its GPU check passed, at the shape params.yaml gives it, and its file still
has the sha256 that validation, lint and GPU check recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.core.aspects import Aspect


class NotShippableError(FarmError, RuntimeError):
    """An aspect's file is missing, failed a check, or changed since; the message says which."""


@dataclass(frozen=True)
class Shipped:
    aspect: Aspect
    file: Path
    sha256: str
    metrics: dict  # validate stage: CPU fidelity and gates
    lint: dict  # validate stage: the GPU lint
    gpu: dict  # gpu stage: the GPU accelerator's check (or that it was skipped)


def verified(aspect: Aspect) -> Shipped:
    name = aspect.name
    try:
        metrics = json.loads(paths.metrics(name).read_text())
        lint = json.loads(paths.lint_report(name).read_text())
    except FileNotFoundError as exc:
        raise NotShippableError(f"aspect {name}: not validated yet ({exc.filename} missing)") from None
    if not metrics.get("passed"):
        raise NotShippableError(f"aspect {name}: validation failed: {metrics.get('failures')}")
    if (metrics["height"], metrics["width"]) != (aspect.height, aspect.width):
        raise NotShippableError(f"aspect {name}: validated at {metrics['height']}x{metrics['width']}, "
                                f"params say {aspect.shape}")
    try:
        gpu = json.loads(paths.gpu_metrics(name).read_text())
    except FileNotFoundError as exc:
        raise NotShippableError(f"aspect {name}: not checked on the GPU yet ({exc.filename} missing)") from None
    if not gpu.get("passed"):
        raise NotShippableError(f"aspect {name}: GPU check failed: {gpu.get('failures')}")
    shipped = paths.fp16_model(name)
    sha256 = fileio.sha256_file(shipped)
    for what, record in (("validation", metrics), ("GPU lint", lint), ("GPU check", gpu)):
        if sha256 != record.get("sha256"):
            raise NotShippableError(f"aspect {name}: {shipped} is not the file its {what} was about (sha256 "
                                    f"{sha256[:12]}... != {str(record.get('sha256'))[:12]}...); run `dvc repro`")
    return Shipped(aspect, shipped, sha256, metrics, lint, gpu)
