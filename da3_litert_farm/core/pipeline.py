"""The farm's DVC stages, named once, in dvc.yaml's order (tests/test_pipeline.py checks dvc.yaml against them).

SHARED_STAGES run once for every aspect, PER_ASPECT_STAGES once per aspect (`foreach: ${aspects}` in
dvc.yaml, named stage@aspect) in this order, FINAL_STAGES once over all the aspects. The parallel
build (da3_litert_farm.ops.build) runs SHARED_STAGES here, PER_ASPECT_STAGES on the workers (the GPU
check last, with the machine to itself) and FINAL_STAGES here again.
"""

from __future__ import annotations

import json
from pathlib import Path

from da3_litert_farm.core import paths

SHARED_STAGES = ("params", "checkpoint")
PER_ASPECT_STAGES = ("patch", "export", "quantize", "validate", "gpu")
FINAL_STAGES = ("bundle", "catalog", "report")
STAGES = (*SHARED_STAGES, *PER_ASPECT_STAGES, *FINAL_STAGES)
GPU_STAGE = "gpu"  # the per-aspect stage that runs LiteRT's GPU accelerator; nothing per-aspect follows it
CONVERT_STAGES = tuple(s for s in PER_ASPECT_STAGES if s != GPU_STAGE)

# Where each per-aspect stage records its wall time, as "seconds" in a JSON file.
_SECONDS_FILE = {"patch": paths.patch_report, "export": paths.export_report, "quantize": paths.quantize_report,
                 "validate": paths.metrics, "gpu": paths.gpu_metrics}


def stage_name(stage: str, aspect: str) -> str:
    """DVC's name for a per-aspect stage of one aspect (foreach: stage@key)."""
    return f"{stage}@{aspect}"


def aspect_stages(aspect: str) -> list[str]:
    """Every per-aspect stage of one aspect, in order."""
    return [stage_name(s, aspect) for s in PER_ASPECT_STAGES]


def stage_seconds(aspect: str, root: Path = Path()) -> dict[str, float | None]:
    """Wall time of each per-aspect stage of `aspect` as the stage recorded it, from the files under
    the repository `root` (None: not recorded, e.g. the file is missing)."""
    def seconds(path: Path) -> float | None:
        return json.loads(path.read_text()).get("seconds") if path.exists() else None

    return {stage: seconds(root / where(aspect)) for stage, where in _SECONDS_FILE.items()}
