"""GPU stage: run the shipped file on LiteRT's real GPU accelerator, in FP16 as phones do (and in each other
mode of validation.gpu_modes an app may choose, each gated alike).

Run by the DVC stage in stages/gpu.py.

Loads the shipped FP16 .tflite with the GPU accelerator (ML Drift over WebGPU; on a machine
without a GPU, Mesa's lavapipe), records the adapter, whether every op runs on the GPU and
whether the adapter's arithmetic really is FP16 (measured: an adapter without it makes ML
Drift fall back to FP32 silently), and compares the GPU output on `validation.gpu_photos`
(preprocessed as an app does, at the cell's native shape) with the official FP32 PyTorch
model's depth maps that validate@ASPECT saved in depth.npz: the same maps the CPU check used,
so the two checks share one reference and this stage needs no PyTorch. Writes gpu.json (DVC
metrics) and the GPU's depth map of each photo (gpu_depth.npz, float32 [1,1,H,W] per photo
name), then fails if a gate fails: fully accelerated, FP16 arithmetic, finite output,
validation.gpu_min_pearson and validation.gpu_max_mean_rel on every GPU photo. A failed cell
never reaches the catalog.

With `validation.gpu: skip` it runs nothing and records that the check was skipped; the
catalog says so and `make publish` refuses such a catalog unless told otherwise.

The software adapter runs on the CPU cores, one to several minutes per inference at full size
(docs/benchmarks.md; docs/gpu-fidelity.md says why and why one photo is the default). Run it
alone: heavy work beside it can make a GPU read fail (see GpuModel).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from da3_litert_farm.core import fileio, paths
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.checks.agreement import compare, gate_fidelity
from da3_litert_farm.checks.reference_maps import references
from da3_litert_farm.core.gpu_modes import DEFAULT_MODE, recommend
from da3_litert_farm.gpu.gpu_runtime import Adapter, GpuError, GpuModel
from da3_litert_farm.config.params import ValidationParams

GATE_KEYS = ("validation.gpu_min_pearson", "validation.gpu_max_mean_rel")
Say = Callable[[str], None]  # one progress line (the stage's Run.say adds the elapsed time): it runs for minutes


def _quiet(line: str) -> None:
    pass


def run_on_gpu(model_file, refs: dict[str, tuple[np.ndarray, np.ndarray]], min_pearson: float,
               max_mean_rel: float, modes: tuple[str, ...] = (DEFAULT_MODE,),
               mode_gates: dict[str, tuple[float, float, tuple[str, str]]] | None = None, say: Say = _quiet
               ) -> tuple[dict, dict[str, np.ndarray]]:
    """Load `model_file` on the GPU accelerator in each mode, run every photo, gate: (the gpu.json
    record, the depth map of each photo in the default mode). The record's top level is the default
    mode, what an app gets unless it asks; `modes` holds each other mode's own record and gates.
    A mode of `mode_gates` is gated by its own (min Pearson, max mean relative error, their params keys);
    every other by min_pearson and max_mean_rel. The record names the mode it recommends to apps.
    `say` gets a line as each mode loads and each photo starts and ends."""
    record, depths = run_in_mode(model_file, refs, min_pearson, max_mean_rel, say=say)
    others = {}
    for mode in (m for m in modes if m != DEFAULT_MODE):
        gates = (mode_gates or {}).get(mode, (min_pearson, max_mean_rel, GATE_KEYS))
        other, _ = run_in_mode(model_file, refs, *gates, mode=mode, say=say)
        others[mode] = {k: v for k, v in other.items() if k not in ("checked", "adapter")}
        record["failures"] += [f"{mode}: {failure}" for failure in other["failures"]]
    if others:
        record.update(modes=others, passed=not record["failures"])
    record["recommended_mode"] = recommend({DEFAULT_MODE: record, **others})
    return record, depths


def run_in_mode(model_file, refs: dict[str, tuple[np.ndarray, np.ndarray]], min_pearson: float,
                max_mean_rel: float, keys: tuple[str, str] = GATE_KEYS,
                mode: str = DEFAULT_MODE, say: Say = _quiet) -> tuple[dict, dict[str, np.ndarray]]:
    """run_on_gpu in one mode (core.gpu_modes), gated by min_pearson and max_mean_rel, which the params keys
    `keys` set."""
    started = time.time()
    say(f"{mode}: loading {model_file} on the GPU accelerator")
    model = GpuModel(model_file, mode)
    adapter = model.adapter or Adapter("not reported by the runtime", "unknown", "unknown")
    say(f"{mode}: loaded on {adapter} in {time.time() - started:.0f} s")
    record = {
        "checked": True,
        "adapter": {"name": adapter.name, "backend": adapter.backend, "type": adapter.type},
        "fully_accelerated": model.fully_accelerated,
        "rejected_ops": model.rejected_ops,
        "precision": model.precision,
        "load_seconds": time.time() - started,
        "photos": {},
    }
    failures, depths = [], {}
    if not model.fully_accelerated:
        rejected = ", ".join(model.rejected_ops) or "see `python -m da3_litert_farm.checks.gpu_lint FILE`"
        failures.append(f"not fully accelerated: ops the GPU delegate rejected run on the CPU ({rejected})")
    if record["precision"] == "fp32" and mode != "fp32":
        failures.append(f"the adapter {adapter} computes in FP32 only (no FP16 arithmetic), so its figures would not "
                        "describe FP16 on a phone: run the check on an adapter with FP16 (`python -m "
                        "da3_litert_farm.gpu.gpu_setup` says which it has) or set validation.gpu: skip")
    elif record["precision"] != mode:
        failures.append(f"asked for {mode}, the runtime on {adapter} computes {record['precision']} (the accumulation "
                        f"probe, gpu_runtime.arithmetic_precision), so its figures would not describe {mode}"
                        + ("" if mode == DEFAULT_MODE else ": drop it from validation.gpu_modes on this machine"))
    if not failures:
        for n, (photo, (image, reference)) in enumerate(refs.items(), 1):
            say(f"{mode}: photo {photo!r} ({n} of {len(refs)}) running")
            t = time.time()
            try:
                depth = model(image)
            except GpuError as exc:
                failures.append(f"photo {photo!r}: {exc}")
                break
            depths[photo] = depth
            finite = bool(np.isfinite(depth).all())
            record["photos"][photo] = {**compare(depth, reference), "finite": finite, "seconds": time.time() - t}
            m = record["photos"][photo]
            say(f"{mode}: photo {photo!r} done in {m['seconds']:.0f} s: 1-r {1 - m['pearson']:.1e}, "
                f"mean rel error {m['mean_rel_error']:.1e}")
            if not finite:
                failures.append(f"non-finite output (NaN or Inf) on photo {photo!r}")
    gates, gate_failures = gate_fidelity(record["photos"], min_pearson, max_mean_rel, keys) \
        if record["photos"] else ({}, [])
    failures += gate_failures
    record.update(
        pearson_min=gates.get("min_pearson", {}).get("value"),
        mean_rel_max=gates.get("max_mean_rel", {}).get("value"),
        seconds=time.time() - started,
        gates={"fully_accelerated": {"passed": model.fully_accelerated},
               mode: {"passed": record["precision"] == mode},  # the arithmetic asked for
               "finite": {"passed": bool(record["photos"]) and all(m["finite"] for m in record["photos"].values())},
               **gates},
        passed=not failures,
        failures=failures,
    )
    return record, depths


def gpu_check(aspect: Cell, validation: ValidationParams, say: Say = _quiet) -> tuple[dict, dict[str, np.ndarray]]:
    shipped = paths.fp16_model(aspect.name)
    head = {"cell": aspect.name, "height": aspect.height, "width": aspect.width, "file": str(shipped),
            "sha256": fileio.sha256_file(shipped)}
    if validation.gpu == "skip":
        return {**head, "checked": False, "reason": "validation.gpu is 'skip' in params.yaml", "passed": True,
                "failures": []}, {}
    refs = references(aspect, validation.gpu_photos)
    record, depths = run_on_gpu(shipped, refs, validation.gpu_min_pearson, validation.gpu_max_mean_rel,
                                validation.gpu_modes, {m: validation.gpu_gates(m) for m in validation.gpu_modes}, say)
    return {**head, **record}, depths
