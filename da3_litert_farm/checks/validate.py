"""Validate stage: the shipped .tflite vs the official PyTorch model, plus the GPU lint.

Run by the DVC stage in stages/validate.py.

Writes metrics.json (every figure and the verdict), lint.json (bound to the file's sha256) and depth.npz (the
official and the CPU depth map of each photo, float32 [1,1,H,W]), then fails if
a gate fails: on any photo, Pearson below validation.min_pearson or mean relative error above
validation.max_mean_rel (Pearson alone passes a depth map off by a factor or an offset); or
any GPU-lint problem (a CONV_2D/FULLY_CONNECTED weight not in FP16, a tensor over
max_tensor_mib, an op the delegate rejects). This is the CPU path (XNNPACK); the GPU stage
checks the same file on the GPU accelerator. A failed cell never reaches the catalog.
"""

from __future__ import annotations



from da3_litert_farm.core import paths
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.model.weights import load_official_from_dir
from da3_litert_farm.checks.agreement import gate_fidelity, worst_case
from da3_litert_farm.checks.fidelity import TFLiteModel, fidelity_per_photo, inference_ms
from da3_litert_farm.checks.gpu_lint import lint
from da3_litert_farm.core.tensor_plan import MIB
from da3_litert_farm.checks.letterbox import letterbox_penalty
from da3_litert_farm.config.params import Params
from da3_litert_farm.model.photo_input import load_photo_array

GATE_KEYS = ("validation.min_pearson", "validation.max_mean_rel")
CPU_THREADS = 2  # XNNPACK threads: the farm machine's cores, and what a phone app commonly gives it


def validate(aspect: Cell, params: Params) -> tuple[dict, dict, dict]:
    """(metrics, lint report, depth maps: official and CPU per photo) for the shipped file of one cell."""
    validation = params.validation
    shipped = paths.fp16_model(aspect.name)
    report = lint(shipped, require_fp16=True, max_tensor_bytes=params.max_tensor_mib * MIB)
    official = load_official_from_dir(paths.checkpoint_dir(aspect.model))
    maps = {}
    model = TFLiteModel(shipped, threads=CPU_THREADS)
    per_photo = fidelity_per_photo(official, model, validation.photos, aspect.height, aspect.width, maps)
    timed = validation.photos[0]
    worst = worst_case(per_photo)
    gates, failures = gate_fidelity(per_photo, validation.min_pearson, validation.max_mean_rel, GATE_KEYS)
    failures += [f"gpu_lint: {p}" for p in report.problems]
    metrics = {
        "cell": aspect.name,
        "height": aspect.height,
        "width": aspect.width,
        "file": str(shipped),
        "sha256": report.sha256,
        "bytes": shipped.stat().st_size,
        "passed": not failures,
        "failures": failures,
        "gates": {
            **gates,
            "gpu_clean": {"passed": report.ok, "problems": len(report.problems)},
            "fp16_weights": {"passed": report.all_weights_fp16, "weight_dtypes": report.weight_dtypes},
            "max_tensor": {"limit": report.max_tensor_bytes, "value": report.largest_tensor["fp16_bytes"],
                           "passed": report.largest_tensor["fp16_bytes"] <= report.max_tensor_bytes},
        },
        "fidelity": {**worst, "one_minus_pearson": 1.0 - worst["pearson"], "photos": per_photo},
        "gpu_lint": {"gpu_clean": report.ok, "ops": sum(report.op_histogram.values()),
                     "max_rank": report.max_rank, "fp16_weight_tensors": report.fp16_weights,
                     "largest_tensor": report.largest_tensor},
        # What an inference costs on this machine's CPU (not gated: a machine's figure, not the file's).
        "cpu_inference": {"ms": inference_ms(model, load_photo_array(timed, aspect.height, aspect.width)),
                          "threads": CPU_THREADS, "photo": timed},
        # What a square model would cost this aspect instead (official model; not gated).
        "letterbox": letterbox_penalty(official, validation.photos, aspect.height, aspect.width),
    }
    return metrics, report.summary(), maps
