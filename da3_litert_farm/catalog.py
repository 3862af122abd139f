"""Catalog stage: one JSON document describing every shipped model, checked against its schema.

    python -m da3_litert_farm.catalog

Lists exactly the aspects in params.yaml, each only if its CPU validation and its GPU check
passed and its file still has the sha256 that validation, lint and GPU check recorded. Folders and dvc.lock entries of aspects no longer in
params.yaml are removed.
The document is validated against da3_litert_farm/catalog.schema.json before it is written.
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import jsonschema
import yaml

from da3_litert_farm import fileio, paths
from da3_litert_farm.params import Params, ParamsError, load_params
from da3_litert_farm.photos import PREPROCESSING
from da3_litert_farm.releases import stress_warning

SCHEMA_FILE = Path(__file__).with_name("catalog.schema.json")
SCHEMA_VERSION = 1
TOOLS = ("torch", "litert-torch", "ai-edge-litert", "ai-edge-quantizer", "depth-anything-3", "dvc")
PRECISION = "fp16-weights"  # FP16 weights (dequantized at load), FP32 activations and I/O
OUTPUT_MEANING = (
    "relative depth: the official DA3 `depth` output (exp of the head's depth logit), larger is "
    "farther; defined up to scale, not metric"
)


class CatalogError(RuntimeError):
    pass


def load_schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


def validate_catalog(document: dict) -> None:
    """Raise jsonschema.ValidationError if the document does not follow the catalog schema."""
    jsonschema.validate(document, load_schema(), cls=jsonschema.Draft202012Validator)


def tool_versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in TOOLS}


def model_entry(params: Params, name: str) -> dict:
    """The catalog entry of one aspect, from what its validate stage recorded."""
    aspect = params.aspect(name)
    try:
        metrics = json.loads(paths.metrics(name).read_text())
        lint = json.loads(paths.lint_report(name).read_text())
    except FileNotFoundError as exc:
        raise CatalogError(f"aspect {name}: not validated yet ({exc.filename} missing)") from None
    if not metrics.get("passed"):
        raise CatalogError(f"aspect {name}: validation failed: {metrics.get('failures')}")
    if (metrics["height"], metrics["width"]) != (aspect.height, aspect.width):
        raise CatalogError(f"aspect {name}: validated at {metrics['height']}x{metrics['width']}, "
                           f"params say {aspect.shape}")
    try:
        gpu = json.loads(paths.gpu_metrics(name).read_text())
    except FileNotFoundError as exc:
        raise CatalogError(f"aspect {name}: not checked on the GPU yet ({exc.filename} missing)") from None
    if not gpu.get("passed"):
        raise CatalogError(f"aspect {name}: GPU check failed: {gpu.get('failures')}")
    shipped = paths.fp16_model(name)
    sha256 = fileio.sha256_file(shipped)
    for what, record in (("validation", metrics), ("GPU lint", lint), ("GPU check", gpu)):
        if sha256 != record.get("sha256"):
            raise CatalogError(f"aspect {name}: {shipped} is not the file its {what} was about (sha256 "
                               f"{sha256[:12]}... != {str(record.get('sha256'))[:12]}...); run `dvc repro`")
    fidelity = metrics["fidelity"]
    return {
        "aspect": name,
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
            "meaning": OUTPUT_MEANING,
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
        },
        "gpu": gpu_entry(gpu),
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
    }


def build_catalog(params: Params, created: str | None = None) -> dict:
    provenance = json.loads(paths.PROVENANCE.read_text())
    document = {
        "schema_version": SCHEMA_VERSION,
        "name": params.catalog.name,
        "version": params.catalog.version,
        "created": created or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "checkpoint": provenance,
        "tools": tool_versions(),
        "models": [model_entry(params, name) for name in params.aspects],
    }
    if stress_warning(document):
        document["warning"] = stress_warning(document)
    validate_catalog(document)
    return document


def prune_lock(params: Params) -> list[str]:
    """Drop dvc.lock entries of per-aspect stages whose aspect left params.yaml.

    DVC keeps them forever otherwise (and with them, cache objects `dvc gc` would keep).
    DVC rewrites dvc.lock after this stage by reading it from disk, so the pruning stays.
    """
    from dvc.utils.serialize import modify_yaml

    if not paths.LOCK_FILE.exists():
        return []
    dvc_stages = yaml.safe_load(paths.DVC_FILE.read_text())["stages"]
    per_aspect = {name for name, stage in dvc_stages.items() if "foreach" in stage}
    with modify_yaml(paths.LOCK_FILE) as lock:
        stages = lock.get("stages", {})
        stale = [name for name in stages if "@" in name and name.split("@", 1)[0] in per_aspect
                 and name.split("@", 1)[1] not in params.aspects]
        for name in stale:
            del stages[name]
    return stale


def stale_aspect_dirs(params: Params) -> list[Path]:
    if not paths.MODELS.is_dir():
        return []
    return sorted(d for d in paths.MODELS.iterdir() if d.is_dir() and d.name not in params.aspects)


def main(argv: list[str] | None = None) -> int:
    try:
        params = load_params()
        document = build_catalog(params)
    except (ParamsError, CatalogError, jsonschema.ValidationError) as exc:
        print(f"catalog: {exc}", file=sys.stderr)
        return 1
    fileio.write_json(paths.CATALOG, document)
    for stale in stale_aspect_dirs(params):
        shutil.rmtree(stale)
        print(f"catalog: removed {stale} (aspect no longer in params.yaml)")
    for entry in prune_lock(params):
        print(f"catalog: removed {entry} from {paths.LOCK_FILE}")
    print(f"catalog: {document['name']} {document['version']} with {len(document['models'])} models "
          f"({', '.join(m['aspect'] for m in document['models'])}) -> {paths.CATALOG}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
