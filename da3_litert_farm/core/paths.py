"""Where every stage reads and writes, relative to the repository root (DVC runs stages there).

dvc.yaml names the same paths; tests/test_dvc_yaml.py checks the two agree.
"""

from __future__ import annotations

from pathlib import Path

from da3_litert_farm.core.cells import split_cell

DVC_FILE = Path("dvc.yaml")
LOCK_FILE = Path("dvc.lock")
ARTIFACTS = Path("artifacts")
# The `params` stage's checked copy of params.yaml: one file per cell (its shape) and per model (its
# checkpoint settings). Every stage that changes anything depends on one of them, so DVC runs the
# check first and a bad params.yaml stops the farm before any output is removed.
CHECKED_PARAMS = ARTIFACTS / "params"
CHECKPOINTS = ARTIFACTS / "checkpoints"  # one folder per model: config.json + model.safetensors (Hub layout)
CATALOG = ARTIFACTS / "catalog.json"
BUNDLES = ARTIFACTS / "bundles"  # one folder per bundle (MODEL-TIER): its aspects in one file
REPORT_DIR = ARTIFACTS / "report"  # the report stage's page; `make report` adds its screenshot
REPORT_PAGE = REPORT_DIR / "index.html"
REPORT_IMAGES = REPORT_DIR / "images"
REPORT_SCREENSHOT = REPORT_DIR / "screenshot.png"  # not a DVC output: written by the browser check
SUMMARY = ARTIFACTS / "summary"  # <cell>.json, a few figures each: what `dvc metrics show|diff` prints
PLOTS = ARTIFACTS / "plots.json"  # one row per cell: what `dvc plots show|diff` draws
LOCAL_CHECKPOINTS = Path("checkpoints")  # where `source: local` checkpoints live (tracked by DVC)
# What native code (LiteRT, Dawn, Mesa, QAIRT) writes to stderr and stdout, one file per stage run
# (STAGE@NAME.log), out of the terminal (config.native_log); git ignores the folder, DVC never sees it.
NATIVE_LOGS = Path(".farm-logs")


MODELS = ARTIFACTS / "models"  # MODEL/TIER/ASPECT/ per cell; a bundle depends on its MODEL/TIER folder
# MODEL/TIER/ASPECT/ per cell: its files compiled for Qualcomm NPUs (npu@CELL). A tree of its own, so a
# recompile leaves the cell's folder, and with it the bundle, alone.
NPU = ARTIFACTS / "npu"


CHECKED_MODELS = CHECKED_PARAMS / "models"
CHECKED_CELLS = CHECKED_PARAMS / "cells"


def checked_model(model: str) -> Path:
    """A model's checkpoint settings as the params stage checked them (the checkpoint stage's input)."""
    return CHECKED_MODELS / f"{model}.json"


def checked_cell(cell: str) -> Path:
    return CHECKED_CELLS / f"{cell}.json"


def checkpoint_dir(model: str) -> Path:
    return CHECKPOINTS / model


def provenance(model: str) -> Path:
    return checkpoint_dir(model) / "provenance.json"


def tier_dir(model: str, tier: int) -> Path:
    """The folder of one model's cells at one tier: what its bundle is made of."""
    return MODELS / model / str(tier)


def cell_dir(cell: str) -> Path:
    model, tier, aspect = split_cell(cell)
    return tier_dir(model, tier) / aspect


def bundle_dir(bundle: str) -> Path:
    return BUNDLES / bundle


BUNDLE_FILE = "model_fp16.tflite"  # in each bundle's folder: one signature per aspect, each buffer stored once
BUNDLE_RECORD = "bundle.json"  # beside it: its gates, bytes per aspect and load costs


def bundle_model(bundle: str) -> Path:
    return bundle_dir(bundle) / BUNDLE_FILE


def bundle_record(bundle: str) -> Path:
    return bundle_dir(bundle) / BUNDLE_RECORD


def summary(cell: str) -> Path:
    return SUMMARY / f"{cell}.json"


def patched_program(cell: str) -> Path:
    """torch.export program of the GPU-clean module (input of the export stage)."""
    return cell_dir(cell) / "patched.pt2"


def patch_report(cell: str) -> Path:
    return cell_dir(cell) / "patch.json"


def export_report(cell: str) -> Path:
    """Seconds, peak RSS and size of the conversion."""
    return cell_dir(cell) / "export.json"


def quantize_report(cell: str) -> Path:
    """Seconds and sizes of the FP16 weight quantization."""
    return cell_dir(cell) / "quantize.json"


def fp32_model(cell: str) -> Path:
    return cell_dir(cell) / "model_fp32.tflite"


def fp16_model(cell: str) -> Path:
    """The shipped file."""
    return cell_dir(cell) / "model_fp16.tflite"


def metrics(cell: str) -> Path:
    """Validation numbers and verdict (all of them; artifacts/summary.json holds the headline figures)."""
    return cell_dir(cell) / "metrics.json"


def gpu_metrics(cell: str) -> Path:
    """The shipped file on the GPU accelerator: adapter, residency, FP16 fidelity."""
    return cell_dir(cell) / "gpu.json"


def depth_maps(cell: str) -> Path:
    """The official and the CPU (.tflite) depth map per validation photo (npz, `<photo>.official|cpu`)."""
    return cell_dir(cell) / "depth.npz"


def gpu_depth(cell: str) -> Path:
    """The GPU accelerator's depth map per validation photo (npz; empty when the check was skipped)."""
    return cell_dir(cell) / "gpu_depth.npz"


def lint_report(cell: str) -> Path:
    """The full GPU lint of the shipped file (op histogram, problems)."""
    return cell_dir(cell) / "lint.json"


def npu_dir(cell: str) -> Path:
    """A cell's NPU files, one per chip (npu_model), and what compiling and simulating them measured (npu_record)."""
    model, tier, aspect = split_cell(cell)
    return NPU / model / str(tier) / aspect


def npu_model(cell: str, soc: str) -> Path:
    return npu_dir(cell) / f"{soc}.tflite"


def npu_record(cell: str) -> Path:
    return npu_dir(cell) / "npu.json"


def native_log(stage: str) -> Path:
    """The native log of one stage run, by DVC's name for it (`gpu@small-896-9x16`, `catalog`)."""
    return NATIVE_LOGS / f"{stage}.log"
