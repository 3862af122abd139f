"""Where every stage reads and writes, relative to the repository root (DVC runs stages there).

dvc.yaml names the same paths; tests/test_dvc_yaml.py checks the two agree.
"""

from __future__ import annotations

from pathlib import Path

DVC_FILE = Path("dvc.yaml")
LOCK_FILE = Path("dvc.lock")
ARTIFACTS = Path("artifacts")
CHECKPOINT_DIR = ARTIFACTS / "checkpoint"  # config.json + model.safetensors (Hub layout)
PROVENANCE = CHECKPOINT_DIR / "provenance.json"
CATALOG = ARTIFACTS / "catalog.json"
LOCAL_CHECKPOINTS = Path("checkpoints")  # where `source: local` checkpoints live (tracked by DVC)


MODELS = ARTIFACTS / "models"  # one folder per aspect; the catalog stage depends on all of it


def aspect_dir(aspect: str) -> Path:
    return MODELS / aspect


def patched_program(aspect: str) -> Path:
    """torch.export program of the GPU-clean module (input of the export stage)."""
    return aspect_dir(aspect) / "patched.pt2"


def patch_report(aspect: str) -> Path:
    return aspect_dir(aspect) / "patch.json"


def fp32_model(aspect: str) -> Path:
    return aspect_dir(aspect) / "model_fp32.tflite"


def fp16_model(aspect: str) -> Path:
    """The shipped file."""
    return aspect_dir(aspect) / "model_fp16.tflite"


def metrics(aspect: str) -> Path:
    """Validation numbers and verdict (DVC metrics)."""
    return aspect_dir(aspect) / "metrics.json"


def gpu_metrics(aspect: str) -> Path:
    """The shipped file on the GPU accelerator: adapter, residency, FP16 fidelity (DVC metrics)."""
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
