"""`farm show`: what a published catalog version holds, as a table or as JSON (standard library only); and the
check of every catalog the client reads, before it reads one."""

from __future__ import annotations

import math
import re

from da3_litert_farm.core.aspects import ASPECT_NAME, BUNDLE, MAX_SIDE
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.licensing import catalog_license
from da3_litert_farm.core.releases import stress_warning


class CatalogError(FarmError, ValueError):
    """A catalog.json the client cannot use: the message names the field and what it must be."""


# The farm checks a catalog against ops/catalog.schema.json before publishing; the client has no jsonschema, so
# it checks here what it reads, so that a damaged or hostile catalog ends in one named error, never a traceback,
# and no name in it can point a file the client writes outside its folder.
NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")  # params.schema.json's catalog_name: part of every file name pulled
VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?")  # its semver
GPU_MODE = re.compile(r"[a-z0-9_]{1,32}")  # core.gpu_modes, e.g. fp16_fp32_accum
MODEL_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")  # a depth_anything_3 preset, e.g. da3-small (core.models)
MAX_BYTES = 2 ** 40  # 1 TiB: past any model, and exact as a float
SOURCES = ("hub", "local", "random")


def _shown(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def _need(ok: bool, where: str, value: object, what: str) -> None:
    if not ok:
        raise CatalogError(f"{where}: {_shown(value)} is not {what}")


def _field(parent: dict, key: str, where: str, optional: bool = False):
    if key not in parent:
        if optional:
            return None
        raise CatalogError(f"{where}.{key} is missing")
    return parent[key]


def _mapping(value, where: str) -> dict:
    _need(isinstance(value, dict), where, value, "a JSON object")
    return value


def _text(value, where: str, pattern: re.Pattern | None = None, what: str = "a string") -> str:
    _need(isinstance(value, str) and (pattern is None or pattern.fullmatch(value) is not None), where, value, what)
    return value


def _integer(value, where: str, low: int, high: int) -> int:
    _need(isinstance(value, int) and not isinstance(value, bool) and low <= value <= high, where, value,
          f"an integer in [{low}, {high}]")
    return value


def _number(value, where: str) -> None:
    # an int past 2**53 is no figure the farm writes (and math.isfinite would overflow converting it)
    finite = isinstance(value, float) and math.isfinite(value) or (
        isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 2 ** 53)
    _need(finite, where, value, "a finite number")


def _photos(value, where: str) -> None:
    _need(isinstance(value, (list, dict)) and all(isinstance(p, str) for p in value), where, value,
          "a list of photo names")


def _file(value, where: str) -> None:
    """A repository path of a shipped file: relative, inside the repository, a .tflite."""
    parts = value.split("/") if isinstance(value, str) else []
    _need(bool(parts) and value.endswith(".tflite") and "" not in parts and ".." not in parts and "\\" not in value
          and value.isprintable(), where, value, "a relative path to a .tflite inside the repository")


def check_catalog(doc: object) -> dict:
    """`doc` if it holds every field the client reads, each of the right type and range; else CatalogError naming
    the first field that does not. Fields older catalogs lack (gpu, license, bundle, a model's precision, input
    and output) are checked where present."""
    doc = _mapping(doc, "catalog")
    _text(_field(doc, "name", "catalog"), "name", NAME, "a catalog name (lowercase letters, digits, '.', '_', '-')")
    _text(_field(doc, "version", "catalog"), "version", VERSION, "a version like 1.2.0")
    if "created" in doc:
        _text(doc["created"], "created")
    checkpoint = _mapping(_field(doc, "checkpoint", "catalog"), "checkpoint")
    _need(_field(checkpoint, "source", "checkpoint") in SOURCES, "checkpoint.source", checkpoint["source"],
          f"one of {list(SOURCES)}")
    for key in ("repo", "revision", "resolved_revision", "path", "weights_sha256"):
        _need(isinstance(checkpoint.get(key), (str, type(None))), f"checkpoint.{key}", checkpoint.get(key),
              "a string or null")
    _need(isinstance(checkpoint.get("seed"), (int, type(None))), "checkpoint.seed", checkpoint.get("seed"),
          "an integer or null")
    if "model_name" in checkpoint:  # `farm show` prints it: one line, a preset's name
        _text(checkpoint["model_name"], "checkpoint.model_name", MODEL_NAME, "a model name like da3-small")
    for key, values in (("tools", doc.get("tools", {})), ("license", doc.get("license") or {})):
        _need(isinstance(values, dict) and all(isinstance(v, (str, type(None))) for v in values.values()), key,
              values, "an object of strings")
    if doc.get("license"):
        for key in ("code", "weights"):
            _text(_field(doc["license"], key, "license"), f"license.{key}")
    models = _field(doc, "models", "catalog")
    _need(isinstance(models, list) and len(models) > 0, "models", models, "a non-empty list")
    aspects = [_model(m, f"models.{i}") for i, m in enumerate(models)]
    _need(len(set(aspects)) == len(aspects), "models", aspects, "a list of distinct aspects")
    if "bundle" in doc:
        _bundle(doc["bundle"], set(aspects))
    return doc


def _model(m, where: str) -> str:
    m = _mapping(m, where)
    aspect = _text(_field(m, "aspect", where), f"{where}.aspect", re.compile(ASPECT_NAME), "an aspect name")
    _need(aspect != BUNDLE, f"{where}.aspect", aspect, f"an aspect name other than {BUNDLE!r}")
    _text(_field(m, "ratio", where), f"{where}.ratio")
    for key in ("height", "width"):
        _integer(_field(m, key, where), f"{where}.{key}", 1, MAX_SIDE)
    _file(_field(m, "file", where), f"{where}.file")
    _text(_field(m, "sha256", where), f"{where}.sha256")
    _integer(_field(m, "bytes", where), f"{where}.bytes", 1, MAX_BYTES)
    for key in ("input", "output"):
        if key in m:
            _mapping(m[key], f"{where}.{key}")
    output = m.get("output") or {}
    for key in ("kind", "meaning"):  # `farm show` prints them
        if key in output:
            _text(output[key], f"{where}.output.{key}")
    if "metres" in output:
        metres = _mapping(output["metres"], f"{where}.output.metres")
        for key in ("formula", "focal_px"):
            _text(_field(metres, key, f"{where}.output.metres"), f"{where}.output.metres.{key}")
        _number(_field(metres, "focal_divisor", f"{where}.output.metres"), f"{where}.output.metres.focal_divisor")
    if "precision" in m:
        _text(m["precision"], f"{where}.precision")
    if "gmac" in _mapping(m.get("gpu_lint", {}), f"{where}.gpu_lint"):
        _number(m["gpu_lint"]["gmac"], f"{where}.gpu_lint.gmac")
    if "cpu_ms" in _mapping(m.get("cost", {}), f"{where}.cost"):
        _number(m["cost"]["cpu_ms"], f"{where}.cost.cpu_ms")
    fidelity = _mapping(_field(m, "fidelity", where), f"{where}.fidelity")
    for key in ("pearson_min", "mean_rel_error_max"):
        _number(_field(fidelity, key, f"{where}.fidelity"), f"{where}.fidelity.{key}")
    _photos(_field(fidelity, "photos", f"{where}.fidelity"), f"{where}.fidelity.photos")
    gpu = m.get("gpu") or {}
    _mapping(gpu, f"{where}.gpu")
    _need(isinstance(gpu.get("checked", False), bool), f"{where}.gpu.checked", gpu.get("checked"), "true or false")
    _text(gpu.get("reason", ""), f"{where}.gpu.reason")
    if gpu.get("checked"):
        for key in ("pearson_min", "mean_rel_max"):
            _number(_field(gpu, key, f"{where}.gpu"), f"{where}.gpu.{key}")
        _photos(_field(gpu, "photos", f"{where}.gpu"), f"{where}.gpu.photos")
        for key in ("adapter", "precision"):
            _text(_field(gpu, key, f"{where}.gpu"), f"{where}.gpu.{key}")
        for mode, figures in _mapping(gpu.get("modes", {}), f"{where}.gpu.modes").items():
            _text(mode, f"{where}.gpu.modes", GPU_MODE, "a GPU mode like fp16_fp32_accum")
            for key in ("pearson_min", "mean_rel_max"):
                _number(_field(_mapping(figures, f"{where}.gpu.modes.{mode}"), key, f"{where}.gpu.modes.{mode}"),
                        f"{where}.gpu.modes.{mode}.{key}")
        if "recommended_mode" in gpu:  # catalogs made before the farm recommended a mode lack it
            recommended = _mapping(gpu["recommended_mode"], f"{where}.gpu.recommended_mode")
            _text(_field(recommended, "mode", f"{where}.gpu.recommended_mode"), f"{where}.gpu.recommended_mode.mode",
                  GPU_MODE, "a GPU mode like fp16_fp32_accum")
            for key in ("kotlin", "cpp", "rule"):
                _text(_field(recommended, key, f"{where}.gpu.recommended_mode"), f"{where}.gpu.recommended_mode.{key}")
    return aspect


def _bundle(bundle, aspects: set) -> None:
    bundle = _mapping(bundle, "bundle")
    _file(_field(bundle, "file", "bundle"), "bundle.file")
    _text(_field(bundle, "sha256", "bundle"), "bundle.sha256")
    _integer(_field(bundle, "bytes", "bundle"), "bundle.bytes", 1, MAX_BYTES)
    _text(_field(bundle, "precision", "bundle"), "bundle.precision")
    _field(bundle, "load", "bundle")
    signatures = _field(bundle, "signatures", "bundle")
    _need(isinstance(signatures, list) and len(signatures) > 0, "bundle.signatures", signatures, "a non-empty list")
    for i, s in enumerate(signatures):
        where = f"bundle.signatures.{i}"
        _text(_field(_mapping(s, where), "signature", where), f"{where}.signature")
        _need(_field(s, "aspect", where) in aspects, f"{where}.aspect", s["aspect"], "an aspect of models")


def weights(catalog: dict) -> dict:
    """Trained or stress weights, and where they came from (the catalog's checkpoint provenance)."""
    c = catalog["checkpoint"]
    if c["source"] == "random":
        origin = f"seeded random weights (seed {c['seed']}{', outliers planted' if c.get('outliers') else ''})"
    elif c["source"] == "hub":
        origin = f"Hugging Face {c['repo']} at {c.get('resolved_revision') or c.get('revision')}"
    else:
        origin = f"local checkpoint {c.get('path')}"
    return {"kind": "stress" if stress_warning(catalog) else "trained", "source": c["source"], "origin": origin,
            "weights_sha256": c.get("weights_sha256")}


def _gpu(m: dict) -> dict:
    gpu = m.get("gpu") or {}
    if not gpu.get("checked"):
        return {"checked": False, "reason": gpu.get("reason", "catalog made before the farm ran a GPU check")}
    return {"checked": True, "one_minus_pearson": 1 - gpu["pearson_min"], "mean_rel_max": gpu["mean_rel_max"],
            "photos": sorted(gpu["photos"]), "adapter": gpu["adapter"], "precision": gpu["precision"],
            **({"modes": {mode: {"one_minus_pearson": 1 - m["pearson_min"], "mean_rel_max": m["mean_rel_max"]}
                          for mode, m in gpu["modes"].items()}} if gpu.get("modes") else {}),
            **({"recommended_mode": gpu["recommended_mode"]["mode"]} if gpu.get("recommended_mode") else {})}


def _outputs(catalog: dict) -> list[dict]:
    """What the files' outputs mean, each distinct meaning once (catalogs made before the farm converted more than
    one kind of model say only `meaning`)."""
    seen = []
    for m in catalog["models"]:
        out = {k: v for k, v in (m.get("output") or {}).items() if k in ("kind", "meaning", "metres")}
        if out and out not in seen:
            seen.append(out)
    return seen


def summary(catalog: dict) -> dict:
    """The version, one row per model (and the bundle), the weights and the tools that built it."""
    check_catalog(catalog)
    rows = [{"aspect": m["aspect"], "ratio": m["ratio"], "height": m["height"], "width": m["width"],
             "megabytes": round(m["bytes"] / 1e6, 2), "sha256": m["sha256"],
             "gmac": (m.get("gpu_lint") or {}).get("gmac"),  # None in catalogs made before the farm counted it
             "cpu_ms": (m.get("cost") or {}).get("cpu_ms"),  # None in catalogs made before the farm timed it
             "cpu": {"one_minus_pearson": 1 - m["fidelity"]["pearson_min"],
                     "mean_rel_max": m["fidelity"]["mean_rel_error_max"],
                     "photos": sorted(m["fidelity"]["photos"])},
             "gpu": _gpu(m)}
            for m in catalog["models"]]
    bundle = catalog.get("bundle")
    return {
        "name": catalog["name"], "version": catalog["version"], "created": catalog.get("created"),
        "model": catalog["checkpoint"].get("model_name"), "weights": weights(catalog),
        "outputs": _outputs(catalog),
        "warning": stress_warning(catalog),
        "models": rows,
        "bundle": {"megabytes": round(bundle["bytes"] / 1e6, 2), "sha256": bundle["sha256"],
                   "signatures": [s["signature"] for s in bundle["signatures"]]} if bundle else None,
        "license": catalog_license(catalog),
        "tools": catalog.get("tools", {}),
    }


def format_summary(s: dict) -> str:
    w = s["weights"]
    lines = [f"{s['name']} {s['version']} (created {s['created']})" + (f", model {s['model']}" if s["model"] else ""),
             f"weights: {w['kind']}: {w['origin']}" + (f", sha256 {w['weights_sha256'][:12]}" if w["weights_sha256"]
                                                        else "")]
    if s["warning"]:
        lines.append(f"WARNING: {s['warning']}")
    lines.append(f"{'aspect':<10} {'HxW':>9} {'MB':>7} {'GMAC':>6} {'CPU ms':>7}  {'sha256':<12}  {'CPU 1-r':>8} {'CPU rel':>8}  "
                 f"{'GPU 1-r':>8} {'GPU rel':>8}  GPU adapter (photos)")
    for r in s["models"]:
        cpu, gpu = r["cpu"], r["gpu"]
        gpu_text = (f"{gpu['one_minus_pearson']:>8.1e} {gpu['mean_rel_max']:>8.1e}  {gpu['adapter']} "
                    f"({', '.join(gpu['photos'])})" if gpu["checked"] else f"{'not checked':>17}  {gpu['reason']}")
        gmac = f"{r['gmac']:>6.1f}" if r["gmac"] is not None else f"{'-':>6}"
        cpu_ms = f"{r['cpu_ms']:>7.0f}" if r["cpu_ms"] is not None else f"{'-':>7}"
        lines.append(f"{r['aspect']:<10} {r['height']:>4}x{r['width']:<4} {r['megabytes']:>7.2f} {gmac} {cpu_ms}  {r['sha256'][:12]}  "
                     f"{cpu['one_minus_pearson']:>8.1e} {cpu['mean_rel_max']:>8.1e}  {gpu_text}")
        for mode, m in (gpu.get("modes") or {}).items():  # other GPU modes an app may choose
            lines.append(f"{'':<10} {'':>9} {'':>7} {'':>6} {'':>7}  {'':<12}  {'':>8} {'':>8}  "
                         f"{m['one_minus_pearson']:>8.1e} {m['mean_rel_max']:>8.1e}  in GPU mode {mode}"
                         + (" (recommended)" if mode == gpu.get("recommended_mode") else ""))
    if s["bundle"]:
        b = s["bundle"]
        lines.append(f"{'bundle':<10} {'':>9} {b['megabytes']:>7.2f} {'':>6} {'':>7}  {b['sha256'][:12]}  signatures "
                     f"{', '.join(b['signatures'])}")
    lines.append("GMAC: multiply-accumulates per inference, in billions; CPU ms: one inference on the farm machine's "
                 "CPU (XNNPACK); 1-r: 1 - Pearson r, worst photo; rel: mean "
                 "relative error, worst photo; both against the official FP32 model (CPU: XNNPACK; GPU: LiteRT's GPU "
                 "accelerator, FP16 unless a GPU mode is named)")
    for out in s["outputs"]:
        metres = out.get("metres")
        lines.append(f"output: {out.get('kind') or out['meaning']}"
                     + (f"; {metres['formula']}, focal_px = {metres['focal_px']}" if metres else ""))
    lic = s["license"]
    lines.append(f"license: code {lic['code']}; weights {lic['weights']}"
                 + (f"; credit: {lic['attribution']}" if lic["attribution"] else ""))
    lines.append("tools: " + ", ".join(f"{k} {v}" for k, v in s["tools"].items()))
    return "\n".join(lines)
