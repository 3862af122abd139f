"""Where every stage reads and writes, relative to the repository root (DVC runs stages there).

dvc.yaml names the same paths; tests/test_dvc_yaml.py checks the two agree.
"""

from __future__ import annotations

from pathlib import Path

DVC_FILE = Path("dvc.yaml")
LOCK_FILE = Path("dvc.lock")
ARTIFACTS = Path("artifacts")
# The `params` stage's checked copy of params.yaml: one file per aspect (its shape) plus the
# checkpoint settings. Every stage that changes anything depends on one of them, so DVC runs
# the check first and a bad params.yaml stops the farm before any output is removed.
CHECKED_PARAMS = ARTIFACTS / "params"
CHECKED_CHECKPOINT = CHECKED_PARAMS / "checkpoint.json"
CHECKPOINT_DIR = ARTIFACTS / "checkpoint"  # config.json + model.safetensors (Hub layout)
PROVENANCE = CHECKPOINT_DIR / "provenance.json"
CATALOG = ARTIFACTS / "catalog.json"
BUNDLE_DIR = ARTIFACTS / "bundle"  # the bundle stage's output: every aspect in one file
BUNDLE_MODEL = BUNDLE_DIR / "model_fp16.tflite"  # one signature per aspect, each buffer stored once
BUNDLE_RECORD = BUNDLE_DIR / "bundle.json"  # its gates, bytes per aspect and load costs
REPORT_DIR = ARTIFACTS / "report"  # the report stage's page; `make report` adds its screenshot
REPORT_PAGE = REPORT_DIR / "index.html"
REPORT_IMAGES = REPORT_DIR / "images"
REPORT_SCREENSHOT = REPORT_DIR / "screenshot.png"  # not a DVC output: written by the browser check
SUMMARY = ARTIFACTS / "summary"  # <aspect>.json, a few figures each: what `dvc metrics show|diff` prints
PLOTS = ARTIFACTS / "plots.json"  # one row per aspect: what `dvc plots show|diff` draws
LOCAL_CHECKPOINTS = Path("checkpoints")  # where `source: local` checkpoints live (tracked by DVC)


MODELS = ARTIFACTS / "models"  # one folder per aspect; the catalog stage depends on all of it


def aspect_dir(aspect: str) -> Path:
    return MODELS / aspect


def checked_aspect(aspect: str) -> Path:
    return CHECKED_PARAMS / f"{aspect}.json"


def patched_program(aspect: str) -> Path:
    """torch.export program of the GPU-clean module (input of the export stage)."""
    return aspect_dir(aspect) / "patched.pt2"


def patch_report(aspect: str) -> Path:
    return aspect_dir(aspect) / "patch.json"


def summary(aspect: str) -> Path:
    return SUMMARY / f"{aspect}.json"


def export_report(aspect: str) -> Path:
    """Seconds, peak RSS and size of the conversion."""
    return aspect_dir(aspect) / "export.json"


def quantize_report(aspect: str) -> Path:
    """Seconds and sizes of the FP16 weight quantization."""
    return aspect_dir(aspect) / "quantize.json"


def fp32_model(aspect: str) -> Path:
    return aspect_dir(aspect) / "model_fp32.tflite"


def fp16_model(aspect: str) -> Path:
    """The shipped file."""
    return aspect_dir(aspect) / "model_fp16.tflite"


def metrics(aspect: str) -> Path:
    """Validation numbers and verdict (all of them; artifacts/summary.json holds the headline figures)."""
    return aspect_dir(aspect) / "metrics.json"


def gpu_metrics(aspect: str) -> Path:
    """The shipped file on the GPU accelerator: adapter, residency, FP16 fidelity."""
    return aspect_dir(aspect) / "gpu.json"


def depth_maps(aspect: str) -> Path:
    """The official and the CPU (.tflite) depth map per validation photo (npz, `<photo>.official|cpu`)."""
    return aspect_dir(aspect) / "depth.npz"


def gpu_depth(aspect: str) -> Path:
    """The GPU accelerator's depth map per validation photo (npz; empty when the check was skipped)."""
    return aspect_dir(aspect) / "gpu_depth.npz"


def lint_report(aspect: str) -> Path:
    """The full GPU lint of the shipped file (op histogram, problems)."""
    return aspect_dir(aspect) / "lint.json"
