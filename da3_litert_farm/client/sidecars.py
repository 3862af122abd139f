"""What a pull writes beside the model: the JSON sidecar that tells the app how to run the file (its cell, input,
preprocessing, output, fidelity, GPU check, NPU runtime, licence, stress warning), and the names of the pulled
files. A sidecar is made from the catalog alone (plus the repository and the reason line), so that `farm verify`
can make it again from the signed catalog and compare it field by field."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from da3_litert_farm.client import npu_files
from da3_litert_farm.client.catalog import PullError
from da3_litert_farm.client.choice import find_bundle
from da3_litert_farm.client.show import check_catalog
from da3_litert_farm.core.cells import bundle_artifact
from da3_litert_farm.core.licensing import catalog_license
from da3_litert_farm.core.releases import stress_warning, tag_for

SIDECAR_VERSION = 1


def public_repo(repo: str) -> str:
    """The repository as a sidecar may record it: a URL's user and password dropped."""
    parts = urlsplit(repo)
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return repo


def _facts(catalog: dict, entry: dict) -> dict:
    """What a sidecar tells the app to run a cell's file: its precision, input, output, fidelity and GPU check."""
    if missing := [k for k in ("precision", "input", "output") if k not in entry]:
        raise PullError(f"catalog {catalog['version']}: cell {entry['cell']} lacks {', '.join(missing)}, which its "
                        f"sidecar tells the app: a catalog older than the client, or damaged")
    return {"precision": entry["precision"], "input": entry["input"], "output": entry["output"],
            "fidelity": entry["fidelity"],
            "gpu": entry.get("gpu", {"checked": False, "reason": "catalog made before the farm ran a GPU check"})}


def sidecar(catalog: dict, entry: dict, repo: str, reason: str, model_file: str, target: dict | None = None) -> dict:
    """The sidecar of cell `entry`'s GPU file, or of its file compiled for an NPU (`target`, one of its npu targets)."""
    facts = _facts(catalog, entry)
    shipped = npu_files.as_file(entry, target) if target else entry
    return {
        "sidecar_version": SIDECAR_VERSION,
        "model_file": model_file,
        "catalog": {"name": catalog["name"], "version": catalog["version"], "repo": public_repo(repo),
                    "tag": tag_for(catalog["version"])},
        "cell": entry["cell"],
        "model": entry["model"],
        "tier": entry["tier"],
        "aspect": entry["aspect"],
        "ratio": entry["ratio"],
        "selected": reason,
        "sha256": shipped["sha256"],
        "bytes": shipped["bytes"],
        **facts,
        **npu_files.sidecar_part(entry, target, model_file_name(catalog, entry)),
        "license": catalog_license(catalog, entry["model"]),
        "stress_weights": stress_warning(catalog) is not None,
        "warning": stress_warning(catalog),
    }


CHOOSING = ("run the signature whose width/height ratio is closest, in log space, to the frame as it is fed to the "
            "model (after rotation); ties to the larger input, then the name (farm select --camera WxH prints it)")


def bundle_sidecar(catalog: dict, repo: str, model_file: str, bundle: str | None = None) -> dict:
    """What an app needs to run bundle `bundle` (MODEL-TIER; None: the catalog's only one): every signature's
    cell, input, preprocessing and output."""
    check_catalog(catalog)
    if not catalog.get("bundles"):
        raise PullError(f"catalog {catalog['version']} has no bundle")
    found, cells = find_bundle(catalog, bundle), {m["cell"]: m for m in catalog["models"]}
    return {
        "sidecar_version": SIDECAR_VERSION,
        "model_file": model_file,
        "catalog": {"name": catalog["name"], "version": catalog["version"], "repo": public_repo(repo),
                    "tag": tag_for(catalog["version"])},
        "kind": "bundle",
        "bundle": found["bundle"],
        "model": found["model"],
        "tier": found["tier"],
        "sha256": found["sha256"],
        "bytes": found["bytes"],
        "precision": found["precision"],
        "choosing_a_signature": CHOOSING,
        "signatures": [{"signature": s["signature"], "cell": s["cell"], "ratio": cells[s["cell"]]["ratio"],
                        **{k: v for k, v in _facts(catalog, cells[s["cell"]]).items() if k != "precision"}}
                       for s in found["signatures"]],
        "load": found["load"],
        "license": catalog_license(catalog, found["model"]),
        "stress_weights": stress_warning(catalog) is not None,
        "warning": stress_warning(catalog),
    }


def model_file_name(catalog: dict, entry: dict) -> str:
    return f"{catalog['name']}-{entry['cell']}-{entry['height']}x{entry['width']}-fp16.tflite"


def bundle_file_name(catalog: dict, bundle: dict) -> str:
    return f"{catalog['name']}-{bundle_artifact(bundle['bundle'])}-fp16.tflite"


def release_folder_name(catalog: dict) -> str:
    return f"{catalog['name']}-{catalog['version']}.release"
