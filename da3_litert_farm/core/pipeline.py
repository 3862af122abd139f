"""The farm's DVC stages, named once, in dvc.yaml's order (tests/test_pipeline.py checks dvc.yaml against them).

SHARED_STAGES run before any cell (params once, checkpoint once per model: `checkpoint@MODEL`),
PER_CELL_STAGES once per cell (dvc.yaml's `matrix:` over models, tiers and aspects, named
stage@MODEL-TIER-ASPECT) in this order, FINAL_STAGES after them (bundle once per model and tier:
`bundle@MODEL-TIER`; catalog and report once). The parallel build (da3_litert_farm.ops.build) runs
SHARED_STAGES here, PER_CELL_STAGES on the workers (the GPU check last, with the machine to itself)
and FINAL_STAGES here again.
"""

from __future__ import annotations

import json
from pathlib import Path

from da3_litert_farm.core import paths

SHARED_STAGES = ("params", "checkpoint")
PER_CELL_STAGES = ("patch", "export", "quantize", "validate", "npu", "gpu")
FINAL_STAGES = ("bundle", "catalog", "report")
STAGES = (*SHARED_STAGES, *PER_CELL_STAGES, *FINAL_STAGES)
GPU_STAGE = "gpu"  # the per-cell stage that runs LiteRT's GPU accelerator; nothing per-cell follows it
CONVERT_STAGES = tuple(s for s in PER_CELL_STAGES if s != GPU_STAGE)

# Where each per-cell stage records its wall time, as "seconds" in a JSON file.
_SECONDS_FILE = {"patch": paths.patch_report, "export": paths.export_report, "quantize": paths.quantize_report,
                 "validate": paths.metrics, "npu": paths.npu_record, "gpu": paths.gpu_metrics}


def stage_name(stage: str, name: str) -> str:
    """DVC's name for a fanned-out stage of one cell, model or bundle (foreach and matrix: stage@name)."""
    return f"{stage}@{name}"


def cell_stages(cell: str) -> list[str]:
    """Every per-cell stage of one cell, in order."""
    return [stage_name(s, cell) for s in PER_CELL_STAGES]


def stage_seconds(cell: str, root: Path = Path()) -> dict[str, float | None]:
    """Wall time of each per-cell stage of `cell` as the stage recorded it, from the files under
    the repository `root` (None: not recorded, e.g. the file is missing)."""
    def seconds(path: Path) -> float | None:
        return json.loads(path.read_text()).get("seconds") if path.exists() else None

    return {stage: seconds(root / where(cell)) for stage, where in _SECONDS_FILE.items()}
