"""Catalog stage: one JSON document describing every shipped model, checked against its schema.

Run by the DVC stage in stages/catalog.py.

Lists exactly the cells of params.yaml's matrix (model x tier x aspect), each only if its CPU
validation and its GPU check passed and its file still has the sha256 that validation, lint and GPU
check recorded (da3_litert_farm.checks.shipped), where each model's weights came from, and the
bundle of each model and tier.
The document is validated against da3_litert_farm/ops/catalog.schema.json before it is written.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.config.params import Params, validator_for
from da3_litert_farm.core.gpu_modes import APP_SETTING, RECOMMENDATION_RULE
from da3_litert_farm.core.cells import bundle_artifact, npu_artifact, split_bundle
from da3_litert_farm.core.licensing import license_entry
from da3_litert_farm.core.models import output_entry
from da3_litert_farm.core.photos import PREPROCESSING
from da3_litert_farm.core.releases import artifact_name, stress_warning
from da3_litert_farm.checks.shipped import verified

SCHEMA_FILE = Path(__file__).with_name("catalog.schema.json")
_SCHEMA = json.loads(SCHEMA_FILE.read_text())
# What the schema fixes, the catalog writes: one place each.
SCHEMA_VERSION = _SCHEMA["properties"]["schema_version"]["const"]
TOOLS = tuple(_SCHEMA["properties"]["tools"]["required"])
PRECISION = _SCHEMA["$defs"]["precision"]["const"]


class CatalogError(FarmError, RuntimeError):
    pass


def validate_catalog(document: dict) -> None:
    """Raise jsonschema.ValidationError if the document does not follow the catalog schema
    (which refers to params.schema.json and constants.schema.json for what params.yaml sets)."""
    validator_for(_SCHEMA).validate(document)


def tool_versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in TOOLS}


def model_entry(params: Params, name: str) -> dict:
    """The catalog entry of one cell, from what its validate and gpu stages recorded."""
    aspect = params.cell(name)
    checked = verified(aspect)
    metrics, lint, shipped, sha256 = checked.metrics, checked.lint, checked.file, checked.sha256
    fidelity = metrics["fidelity"]
    return {
        "cell": name,
        "model": aspect.model,
        "tier": aspect.tier,
        "aspect": aspect.aspect.name,
        "ratio": aspect.ratio,
        "height": aspect.height,
        "width": aspect.width,
        "file": shipped.as_posix(),
        "sha256": sha256,
        "bytes": shipped.stat().st_size,
        "precision": PRECISION,
        "input": {
            "shape": [1, 3, aspect.height, aspect.width],
            "layout": "NCHW",
            "dtype": "float32",
            "preprocessing": PREPROCESSING,
        },
        "output": {
            "shape": [1, 1, aspect.height, aspect.width],
            "layout": "NCHW",
            "dtype": "float32",
            **output_entry(params.preset(aspect.model)),
        },
        "fidelity": {
            "reference": "official depth_anything_3 PyTorch model, FP32",
            "gate_min_pearson": metrics["gates"]["min_pearson"]["limit"],
            "gate_max_mean_rel": metrics["gates"]["max_mean_rel"]["limit"],
            "pearson_min": fidelity["pearson"],
            "cosine_min": fidelity["cosine"],
            "max_abs_error": fidelity["max_abs_error"],
            "mean_rel_error_max": fidelity["mean_rel_error"],
            "photos": {photo: m["pearson"] for photo, m in fidelity["photos"].items()},
        },
        "gpu_lint": {
            "gpu_clean": lint["gpu_clean"],
            "ops": lint["ops"],
            "max_rank": lint["max_rank"],
            "op_histogram": lint["op_histogram"],
            "fp16_weight_tensors": lint["fp16_weight_tensors"],
            "largest_tensor_bytes": lint["largest_tensor"]["fp16_bytes"],
            "gmac": round(lint["macs"] / 1e9, 2),
        },
        "gpu": gpu_entry(checked.gpu),
        "npu": npu_entry(name, sha256),
        **({"cost": cost_entry(name, metrics, checked.gpu)} if "cpu_inference" in metrics else {}),
    }


def cost_entry(name: str, metrics: dict, gpu: dict) -> dict:
    """What the file costs, measured on the farm's machine (its GMAC, a property of the file, is in gpu_lint):
    CPU milliseconds per inference (XNNPACK), seconds per inference on the GPU check's adapter, and what its
    export took."""
    export = json.loads(paths.export_report(name).read_text())
    photos = [m["seconds"] for m in gpu.get("photos", {}).values()] if gpu.get("checked") else []
    return {
        "cpu_ms": round(metrics["cpu_inference"]["ms"], 1),
        "cpu_threads": metrics["cpu_inference"]["threads"],
        **({"gpu_seconds": round(sorted(photos)[len(photos) // 2], 2)} if photos else {}),
        "export_seconds": round(export["seconds"], 1),
        "export_peak_rss_mib": round(export["peak_rss_mb"]),
    }


def gpu_entry(gpu: dict) -> dict:
    """What the GPU stage measured, or that it was skipped (never a figure that was not measured)."""
    if not gpu["checked"]:
        return {"checked": False, "reason": gpu["reason"]}
    adapter = gpu["adapter"]
    return {
        "checked": True,
        "fully_accelerated": gpu["fully_accelerated"],
        "precision": gpu["precision"],
        "adapter": f"{adapter['name']} ({adapter['backend']}, {adapter['type']})",
        "gate_min_pearson": gpu["gates"]["min_pearson"]["limit"],
        "gate_max_mean_rel": gpu["gates"]["max_mean_rel"]["limit"],
        "pearson_min": gpu["pearson_min"],
        "mean_rel_max": gpu["mean_rel_max"],
        "seconds": round(gpu["seconds"], 1),
        "photos": {photo: m["pearson"] for photo, m in gpu["photos"].items()},
        **({"modes": {mode: {"precision": m["precision"], "pearson_min": m["pearson_min"],
                             "mean_rel_max": m["mean_rel_max"], "seconds": round(m["seconds"], 1)}
                      for mode, m in gpu["modes"].items()}} if gpu.get("modes") else {}),
        "recommended_mode": {"mode": gpu["recommended_mode"], **APP_SETTING[gpu["recommended_mode"]],
                             "rule": RECOMMENDATION_RULE},
    }


def npu_entry(name: str, sha256: str) -> dict:
    """What npu@CELL compiled and measured for the cell whose shipped file has `sha256`, each compiled file checked
    to be the one it measured (never a figure that was not measured)."""
    try:
        record = json.loads(paths.npu_record(name).read_text())
    except FileNotFoundError as exc:
        raise CatalogError(f"cell {name}: not compiled for NPUs yet ({exc.filename} missing); run `dvc repro`") from None
    if not record["passed"]:
        raise CatalogError(f"cell {name}: NPU stage failed: {record['failures']}")
    if record["source_sha256"] != sha256:
        raise CatalogError(f"cell {name}: its NPU files were compiled from another file than the shipped one; run "
                           f"`dvc repro`")
    if not record["compiled"]:
        return {"compiled": False, "reason": record["reason"]}
    targets = {}
    for soc, target in record["targets"].items():
        if fileio.sha256_file(target["file"]) != target["sha256"]:
            raise CatalogError(f"cell {name}: {target['file']} is not the file npu@{name} compiled; run `dvc repro`")
        targets[soc] = {"soc": soc, **{k: target[k] for k in ("soc_id", "htp_arch", "product", "file", "sha256",
                                                              "bytes", "ops_on_npu", "ops_total", "partitions",
                                                              "seconds", "peak_rss_mib")}}
        if "simulator" in target:
            sim = target["simulator"]
            targets[soc]["simulator"] = {
                "gate_min_pearson": sim["gates"]["min_pearson"]["limit"],
                "gate_max_mean_rel": sim["gates"]["max_mean_rel"]["limit"],
                "pearson_min": sim["pearson_min"], "mean_rel_max": sim["mean_rel_max"],
                "vs_cpu": {"pearson_min": min(p["vs_cpu"]["pearson"] for p in sim["photos"].values()),
                           "mean_rel_max": max(p["vs_cpu"]["mean_rel_error"] for p in sim["photos"].values())},
                "seconds": round(sim["seconds"], 1), "shape": sim["shape"], "proxy": sim["proxy"],
                "photos": {photo: p["pearson"] for photo, p in sim["photos"].items()}}
    return {"compiled": True, "compiler": record["compiler"], "qairt": record["qairt"], "targets": targets}


def bundle_entry(bundle: str, models: list[dict]) -> dict:
    """Bundle `bundle` (MODEL-TIER) of exactly these catalog entries, from what its bundle stage recorded."""
    try:
        record = json.loads(paths.bundle_record(bundle).read_text())
    except FileNotFoundError as exc:
        raise CatalogError(f"no bundle {bundle} yet ({exc.filename} missing); run `dvc repro`") from None
    if fileio.sha256_file(paths.bundle_model(bundle)) != record["sha256"]:
        raise CatalogError(f"{paths.bundle_model(bundle)} is not the file the bundle stage checked; run `dvc repro`")
    bundled = {s["cell"]: s["sha256"] for s in record["signatures"]}
    if bundled != {m["cell"]: m["sha256"] for m in models}:
        raise CatalogError(f"bundle {bundle} holds {sorted(bundled)}, not exactly the catalogued files of "
                           f"{sorted(m['cell'] for m in models)}; run `dvc repro`")
    gpu = record["gates"]["gpu"]
    model, tier = split_bundle(bundle)
    return {
        "bundle": bundle,
        "model": model,
        "tier": tier,
        "file": record["file"],
        "sha256": record["sha256"],
        "bytes": record["bytes"],
        "singles_bytes": record["singles_bytes"],
        "precision": PRECISION,
        "signatures": [{k: s[k] for k in ("signature", "cell", "height", "width", "own_bytes")}
                       for s in record["signatures"]],
        "gpu": {k: gpu[k] for k in ("checked", "reason", "adapter", "fully_accelerated", "signature", "photo",
                                    "bitwise_equal") if k in gpu},
        "load": {acc: {which: {k: v for k, v in figures.items() if k in ("signature", "cell", "seconds",
                                                                         "peak_growth_mib")}
                       for which, figures in costs.items()} for acc, costs in record["load"].items()},
    }


def shipped(catalog: dict) -> dict[str, dict]:
    """Every file a catalog ships, by its key: each cell's file by the cell's name, its NPU files by
    core.cells.npu_artifact (CELL-npu-SOC), each bundle by core.cells.bundle_artifact (MODEL-TIER-bundle)."""
    files = {m["cell"]: m for m in catalog["models"]}
    files.update((npu_artifact(m["cell"], soc), {**t, "cell": m["cell"]}) for m in catalog["models"]
                 for soc, t in (m.get("npu") or {}).get("targets", {}).items())
    files.update((bundle_artifact(b["bundle"]), b) for b in catalog.get("bundles", []))
    return files


def shipped_files(catalog: dict) -> dict[str, dict]:
    """The same by artifact name (the catalog's name, then the key): what dvc.yaml's artifacts and tags say."""
    return {artifact_name(catalog, key): m for key, m in shipped(catalog).items()}


def source_entry(model: str) -> dict:
    """Where a model's weights came from (its checkpoint stage's provenance) and their licences."""
    provenance = json.loads(paths.provenance(model).read_text())
    return {"checkpoint": provenance, "license": license_entry(provenance)}


def build_catalog(params: Params, created: str | None = None) -> dict:
    document = {
        "schema_version": SCHEMA_VERSION,
        "name": params.catalog.name,
        "version": params.catalog.version,
        "created": created or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sources": {model: source_entry(model) for model in params.models},
        "tools": tool_versions(),
        "models": [model_entry(params, name) for name in params.cells],
    }
    document["bundles"] = [bundle_entry(bundle, [m for m in document["models"] if m["cell"] in {c.name for c in cells}])
                           for bundle, cells in params.bundles().items()]
    if stress_warning(document):
        document["warning"] = stress_warning(document)
    validate_catalog(document)
    return document
