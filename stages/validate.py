"""Validate stage: the shipped .tflite vs the official PyTorch model, plus the GPU lint.

    python -m stages.validate 9x16

Writes metrics.json (DVC metrics) and lint.json, then fails if a gate fails: Pearson on
any photo below validation.min_pearson, or any GPU-lint problem (which includes missing
FP16 weights). A failed aspect never reaches the catalog.
"""

from __future__ import annotations

import sys
import time

from stages import fileio, paths
from stages.aspects import Aspect
from stages.weights import load_official_from_dir
from stages.fidelity import TFLiteModel, fidelity_per_photo, worst_case
from stages.gpu_lint import lint
from stages.official import CheckpointError
from stages.params import ParamsError, ValidationParams, stage_aspect


def validate(aspect: Aspect, validation: ValidationParams) -> tuple[dict, dict]:
    """(metrics, lint report) for the shipped file of one aspect."""
    shipped = paths.fp16_model(aspect.name)
    report = lint(shipped, require_fp16=True)
    official = load_official_from_dir(paths.CHECKPOINT_DIR)
    per_photo = fidelity_per_photo(official, TFLiteModel(shipped), validation.photos, aspect.height, aspect.width)
    worst = worst_case(per_photo)
    failures = [
        f"pearson {m['pearson']:.7f} on photo {photo!r} < gate validation.min_pearson {validation.min_pearson}"
        for photo, m in per_photo.items() if not m["pearson"] >= validation.min_pearson
    ]
    failures += [f"gpu_lint: {p}" for p in report.problems]
    metrics = {
        "aspect": aspect.name,
        "height": aspect.height,
        "width": aspect.width,
        "file": str(shipped),
        "sha256": fileio.sha256_file(shipped),
        "bytes": shipped.stat().st_size,
        "passed": not failures,
        "failures": failures,
        "gates": {"min_pearson": validation.min_pearson, "gpu_clean": True, "fp16_weights": True},
        "fidelity": {**worst, "one_minus_pearson": 1.0 - worst["pearson"], "photos": per_photo},
        "gpu_lint": {"gpu_clean": report.ok, "ops": sum(report.op_histogram.values()),
                     "max_rank": report.max_rank, "fp16_weight_tensors": report.fp16_weights},
    }
    return metrics, report.summary()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    started = time.time()
    try:
        params, aspect = stage_aspect("validate", argv)
        metrics, lint_summary = validate(aspect, params.validation)
    except (ParamsError, CheckpointError) as exc:
        print(f"validate: {exc}", file=sys.stderr)
        return 1
    fileio.write_json(paths.lint_report(aspect.name), lint_summary)
    fileio.write_json(paths.metrics(aspect.name), metrics)
    if not metrics["passed"]:
        for failure in metrics["failures"]:
            print(f"validate {aspect.name}: FAILED {failure}", file=sys.stderr)
        return 1
    f = metrics["fidelity"]
    print(f"validate {aspect.name}: {aspect.shape} pearson >= {f['pearson']:.7f} (1-r {f['one_minus_pearson']:.1e}), "
          f"{metrics['bytes'] / 1e6:.1f} MB, GPU-clean, {len(f['photos'])} photos, {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
