"""`farm show`: what a published catalog version holds, as a table or as JSON (standard library only); and the
check of every catalog the client reads, before it reads one."""

from __future__ import annotations

import math
import re

from da3_litert_farm.core.aspects import ASPECT_NAME, BUNDLE, MAX_SIDE
from da3_litert_farm.core.cells import MAX_MODEL_NAME, MODEL_NAME, bundle_name, cell_name
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
PRESET = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")  # a depth_anything_3 preset, e.g. da3-small (core.models)
MODEL = re.compile(MODEL_NAME)  # a key of params.yaml's models, e.g. small: part of every cell's name
ASPECT = re.compile(ASPECT_NAME)
SCHEMA_VERSION = 2  # ops/catalog.schema.json's: the client reads this one only
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
    the first field that does not. Fields the client reads only where present (gpu, a source's license, bundles,
    a model's precision, input and output) are checked where present."""
    doc = _mapping(doc, "catalog")
    _schema_version(doc.get("schema_version"))
    _text(_field(doc, "name", "catalog"), "name", NAME, "a catalog name (lowercase letters, digits, '.', '_', '-')")
    _text(_field(doc, "version", "catalog"), "version", VERSION, "a version like 1.2.0")
    if "created" in doc:
        _text(doc["created"], "created")
    sources = _mapping(_field(doc, "sources", "catalog"), "sources")
    _need(len(sources) > 0, "sources", sources, "a non-empty object (one entry per model)")
    for model, source in sources.items():
        _model_name(model, "sources")
        _source(_mapping(source, f"sources.{model}"), f"sources.{model}")
    tools = doc.get("tools", {})
    _need(isinstance(tools, dict) and all(isinstance(v, (str, type(None))) for v in tools.values()), "tools",
          tools, "an object of strings")
    models = _field(doc, "models", "catalog")
    _need(isinstance(models, list) and len(models) > 0, "models", models, "a non-empty list")
    cells = [_model(m, f"models.{i}", sources) for i, m in enumerate(models)]
    _need(len(set(cells)) == len(cells), "models", cells, "a list of distinct cells")
    if "bundles" in doc:
        _bundles(doc["bundles"], {m["cell"]: m for m in models}, sources)
    return doc


def _schema_version(version) -> None:
    """Schema 1 (one model's aspects, one bundle) and schema 2 name their files differently: a client of one must
    not guess at the other."""
    if version == SCHEMA_VERSION and not isinstance(version, bool):
        return
    if version is None or isinstance(version, int) and not isinstance(version, bool) and version < SCHEMA_VERSION:
        written = f"catalog schema_version {version}" if version is not None else "a catalog without schema_version"
        raise CatalogError(f"{written} was written by a farm before models x tiers; this client reads "
                           f"{SCHEMA_VERSION}: pull it with the client of that farm's release")
    if isinstance(version, int) and not isinstance(version, bool):
        raise CatalogError(f"catalog schema_version {version} was written by a farm newer than this client, which "
                           f"reads {SCHEMA_VERSION}: update the client")
    _need(False, "schema_version", version, f"the schema version {SCHEMA_VERSION}")


def _model_name(value, where: str) -> str:
    _text(value, where, MODEL, "a model name (lowercase letters, digits and '_', no '-')")
    _need(len(value) <= MAX_MODEL_NAME, where, value, f"a model name of at most {MAX_MODEL_NAME} characters")
    return value


def _source(source: dict, where: str) -> None:
    """A model's `checkpoint` provenance and, where present, its `license`."""
    at = f"{where}.checkpoint"
    checkpoint = _mapping(_field(source, "checkpoint", where), at)
    _need(_field(checkpoint, "source", at) in SOURCES, f"{at}.source", checkpoint["source"],
          f"one of {list(SOURCES)}")
    for key in ("repo", "revision", "resolved_revision", "path", "weights_sha256"):
        _need(isinstance(checkpoint.get(key), (str, type(None))), f"{at}.{key}", checkpoint.get(key),
              "a string or null")
    _need(isinstance(checkpoint.get("seed"), (int, type(None))), f"{at}.seed", checkpoint.get("seed"),
          "an integer or null")
    if "model_name" in checkpoint:  # `farm show` prints it: one line, a preset's name
        _text(checkpoint["model_name"], f"{at}.model_name", PRESET, "a preset name like da3-small")
    license_ = source.get("license") or {}
    _need(isinstance(license_, dict) and all(isinstance(v, (str, type(None))) for v in license_.values()),
          f"{where}.license", license_, "an object of strings")
    if license_:
        for key in ("code", "weights"):
            _text(_field(license_, key, f"{where}.license"), f"{where}.license.{key}")


def _model(m, where: str, sources: dict) -> str:
    """One file's entry; returns its cell."""
    m = _mapping(m, where)
    model = _model_name(_field(m, "model", where), f"{where}.model")
    _need(model in sources, f"{where}.model", model, f"a model of sources ({', '.join(sources)})")
    tier = _integer(_field(m, "tier", where), f"{where}.tier", 1, MAX_SIDE)
    aspect = _aspect_name(_field(m, "aspect", where), f"{where}.aspect")
    # The cell names the pulled file: it must be the name its parts make, which holds no path separator.
    cell = _field(m, "cell", where)
    _need(cell == cell_name(model, tier, aspect), f"{where}.cell", cell,
          f"{cell_name(model, tier, aspect)!r}, the name its model, tier and aspect make")
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
    return cell


def _aspect_name(value, where: str) -> str:
    _text(value, where, ASPECT, "an aspect name")
    _need(value != BUNDLE, where, value, f"an aspect name other than {BUNDLE!r}")
    return value


def _bundles(bundles, cells: dict, sources: dict) -> None:
    """Each bundle: one model's files at one tier, named MODEL-TIER, a signature per aspect naming its cell."""
    _need(isinstance(bundles, list) and len(bundles) > 0, "bundles", bundles, "a non-empty list")
    names = []
    for i, bundle in enumerate(bundles):
        where = f"bundles.{i}"
        bundle = _mapping(bundle, where)
        model = _model_name(_field(bundle, "model", where), f"{where}.model")
        _need(model in sources, f"{where}.model", model, f"a model of sources ({', '.join(sources)})")
        tier = _integer(_field(bundle, "tier", where), f"{where}.tier", 1, MAX_SIDE)
        name = _field(bundle, "bundle", where)  # names the pulled file, as a cell does
        _need(name == bundle_name(model, tier), f"{where}.bundle", name,
              f"{bundle_name(model, tier)!r}, the name its model and tier make")
        names.append(name)
        _file(_field(bundle, "file", where), f"{where}.file")
        _text(_field(bundle, "sha256", where), f"{where}.sha256")
        _integer(_field(bundle, "bytes", where), f"{where}.bytes", 1, MAX_BYTES)
        _text(_field(bundle, "precision", where), f"{where}.precision")
        _field(bundle, "load", where)
        signatures = _field(bundle, "signatures", where)
        _need(isinstance(signatures, list) and len(signatures) > 0, f"{where}.signatures", signatures,
              "a non-empty list")
        for j, s in enumerate(signatures):
            at = f"{where}.signatures.{j}"
            signature = _aspect_name(_field(_mapping(s, at), "signature", at), f"{at}.signature")
            cell = _field(s, "cell", at)
            entry = cells.get(cell) if isinstance(cell, str) else None
            _need(entry is not None and (entry["model"], entry["tier"]) == (model, tier), f"{at}.cell", cell,
                  f"a cell of model {model} at tier {tier} in models")
            _need(signature == entry["aspect"], f"{at}.signature", signature,
                  f"{entry['aspect']!r}, the aspect of its cell")
        keys = [s["signature"] for s in signatures]
        _need(len(set(keys)) == len(keys), f"{where}.signatures", keys, "a list of distinct signatures")
    _need(len(set(names)) == len(names), "bundles", names, "a list of distinct bundles")


def weights(catalog: dict, model: str) -> dict:
    """A model's preset, trained or stress weights, and where they came from (its checkpoint provenance)."""
    c = catalog["sources"][model]["checkpoint"]
    if c["source"] == "random":
        origin = f"seeded random weights (seed {c['seed']}{', outliers planted' if c.get('outliers') else ''})"
    elif c["source"] == "hub":
        origin = f"Hugging Face {c['repo']} at {c.get('resolved_revision') or c.get('revision')}"
    else:
        origin = f"local checkpoint {c.get('path')}"
    return {"preset": c.get("model_name"), "kind": "stress" if c["source"] == "random" else "trained",
            "source": c["source"], "origin": origin, "weights_sha256": c.get("weights_sha256")}


def _gpu(m: dict) -> dict:
    gpu = m.get("gpu") or {}
    if not gpu.get("checked"):
        return {"checked": False, "reason": gpu.get("reason", "catalog made before the farm ran a GPU check")}
    return {"checked": True, "one_minus_pearson": 1 - gpu["pearson_min"], "mean_rel_max": gpu["mean_rel_max"],
            "photos": sorted(gpu["photos"]), "adapter": gpu["adapter"], "precision": gpu["precision"],
            **({"modes": {mode: {"one_minus_pearson": 1 - m["pearson_min"], "mean_rel_max": m["mean_rel_max"]}
                          for mode, m in gpu["modes"].items()}} if gpu.get("modes") else {}),
            **({"recommended_mode": gpu["recommended_mode"]["mode"]} if gpu.get("recommended_mode") else {})}


def _npu(m: dict) -> dict:
    """Each chip's NPU file of a cell: size, ops on the NPU and, where simulated, fidelity ({}: none compiled)."""
    npu = m.get("npu") or {}
    return {soc: {"megabytes": round(t["bytes"] / 1e6, 2), "htp_arch": t["htp_arch"], "ops_on_npu": t["ops_on_npu"],
                  "ops_total": t["ops_total"], "partitions": t["partitions"],
                  "simulator": {"one_minus_pearson": 1 - t["simulator"]["pearson_min"],
                                "mean_rel_max": t["simulator"]["mean_rel_max"],
                                "vs_cpu_one_minus_pearson": 1 - t["simulator"]["vs_cpu"]["pearson_min"],
                                "shape": t["simulator"]["shape"], "proxy": t["simulator"]["proxy"]}
                  if t.get("simulator") else None}
            for soc, t in (npu.get("targets") or {}).items()} if npu.get("compiled") else {}


def _outputs(catalog: dict) -> list[dict]:
    """What the files' outputs mean, each distinct meaning once, with the models whose files give it."""
    seen: list[dict] = []
    for m in catalog["models"]:
        out = {k: v for k, v in (m.get("output") or {}).items() if k in ("kind", "meaning", "metres")}
        if not out:
            continue
        known = next((s for s in seen if {k: v for k, v in s.items() if k != "models"} == out), None)
        if known is None:
            seen.append({"models": [m["model"]], **out})
        elif m["model"] not in known["models"]:
            known["models"].append(m["model"])
    return seen


def ladder(models: list[dict]) -> list[dict]:
    """The entries grouped by model, then by tier, each group in the order the catalog first lists it."""
    first: dict = {}
    for m in models:
        first.setdefault(m["model"], len(first))
        first.setdefault((m["model"], m["tier"]), len(first))
    return sorted(models, key=lambda m: (first[m["model"]], first[(m["model"], m["tier"])]))


def summary(catalog: dict) -> dict:
    """The version; per model its weights and license; one row per file, grouped by model and tier (the
    ladder); the bundles; the tools that built it."""
    check_catalog(catalog)
    rows = [{"cell": m["cell"], "model": m["model"], "tier": m["tier"], "aspect": m["aspect"], "ratio": m["ratio"],
             "height": m["height"], "width": m["width"],
             "megabytes": round(m["bytes"] / 1e6, 2), "sha256": m["sha256"],
             "gmac": (m.get("gpu_lint") or {}).get("gmac"),  # None in catalogs made before the farm counted it
             "cpu_ms": (m.get("cost") or {}).get("cpu_ms"),  # None in catalogs made before the farm timed it
             "cpu": {"one_minus_pearson": 1 - m["fidelity"]["pearson_min"],
                     "mean_rel_max": m["fidelity"]["mean_rel_error_max"],
                     "photos": sorted(m["fidelity"]["photos"])},
             "gpu": _gpu(m), "npu": _npu(m)}
            for m in ladder(catalog["models"])]
    return {
        "name": catalog["name"], "version": catalog["version"], "created": catalog.get("created"),
        "weights": {model: weights(catalog, model) for model in catalog["sources"]},
        "outputs": _outputs(catalog),
        "warning": stress_warning(catalog),
        "models": rows,
        "bundles": [{"bundle": b["bundle"], "model": b["model"], "tier": b["tier"],
                     "megabytes": round(b["bytes"] / 1e6, 2), "sha256": b["sha256"],
                     "signatures": [s["signature"] for s in b["signatures"]]} for b in catalog.get("bundles", [])],
        "license": {model: catalog_license(catalog, model) for model in catalog["sources"]},
        "tools": catalog.get("tools", {}),
    }


def format_summary(s: dict) -> str:
    lines = [f"{s['name']} {s['version']} (created {s['created']})"]
    for model, w in s["weights"].items():
        lines.append(f"weights of {model}" + (f" ({w['preset']})" if w["preset"] else "") + f": {w['kind']}: "
                     f"{w['origin']}" + (f", sha256 {w['weights_sha256'][:12]}" if w["weights_sha256"] else ""))
    if s["warning"]:
        lines.append(f"WARNING: {s['warning']}")
    width = max([len("model"), *(len(r["model"]) for r in s["models"])])
    lead = width + 1 + 4 + 1 + 10  # model, tier and aspect columns: a GPU mode's line starts past them
    lines.append(f"{'model':<{width}} {'tier':>4} {'aspect':<10} {'HxW':>9} {'MB':>7} {'GMAC':>6} {'CPU ms':>7}  "
                 f"{'sha256':<12}  {'CPU 1-r':>8} {'CPU rel':>8}  {'GPU 1-r':>8} {'GPU rel':>8}  GPU adapter (photos)")
    for r in s["models"]:
        cpu, gpu = r["cpu"], r["gpu"]
        gpu_text = (f"{gpu['one_minus_pearson']:>8.1e} {gpu['mean_rel_max']:>8.1e}  {gpu['adapter']} "
                    f"({', '.join(gpu['photos'])})" if gpu["checked"] else f"{'not checked':>17}  {gpu['reason']}")
        gmac = f"{r['gmac']:>6.1f}" if r["gmac"] is not None else f"{'-':>6}"
        cpu_ms = f"{r['cpu_ms']:>7.0f}" if r["cpu_ms"] is not None else f"{'-':>7}"
        lines.append(f"{r['model']:<{width}} {r['tier']:>4} {r['aspect']:<10} {r['height']:>4}x{r['width']:<4} "
                     f"{r['megabytes']:>7.2f} {gmac} {cpu_ms}  {r['sha256'][:12]}  "
                     f"{cpu['one_minus_pearson']:>8.1e} {cpu['mean_rel_max']:>8.1e}  {gpu_text}")
        for mode, m in (gpu.get("modes") or {}).items():  # other GPU modes an app may choose
            lines.append(f"{'':<{lead}} {'':>9} {'':>7} {'':>6} {'':>7}  {'':<12}  {'':>8} {'':>8}  "
                         f"{m['one_minus_pearson']:>8.1e} {m['mean_rel_max']:>8.1e}  in GPU mode {mode}"
                         + (" (recommended)" if mode == gpu.get("recommended_mode") else ""))
        for soc, n in r["npu"].items():  # the cell's files compiled for Qualcomm NPUs (farm pull --soc)
            sim = n["simulator"]
            lines.append(f"{'':<{lead}} NPU {soc} (HTP {n['htp_arch']}): {n['megabytes']:.2f} MB, {n['ops_on_npu']}/"
                         f"{n['ops_total']} ops in {n['partitions']} partition; "
                         + (f"HTP simulator 1-r {sim['one_minus_pearson']:.1e} rel {sim['mean_rel_max']:.1e} (vs the "
                            f"CPU file 1-r {sim['vs_cpu_one_minus_pearson']:.1e})"
                            + (f" on its proxy at {sim['shape']}" if sim["proxy"] else "") if sim else "not simulated"))
    for b in s["bundles"]:
        lines.append(f"bundle {b['bundle']}: {b['megabytes']:.2f} MB, sha256 {b['sha256'][:12]}, signatures "
                     f"{', '.join(b['signatures'])}")
    lines.append("GMAC: multiply-accumulates per inference, in billions; CPU ms: one inference on the farm machine's "
                 "CPU (XNNPACK); 1-r: 1 - Pearson r, worst photo; rel: mean "
                 "relative error, worst photo; both against the official FP32 model (CPU: XNNPACK; GPU: LiteRT's GPU "
                 "accelerator, FP16 unless a GPU mode is named)")
    for out in s["outputs"]:
        metres = out.get("metres")
        lines.append(f"output of {', '.join(out['models'])}: {out.get('kind') or out.get('meaning')}"
                     + (f"; {metres['formula']}, focal_px = {metres['focal_px']}" if metres else ""))
    for model, lic in s["license"].items():
        lines.append(f"license of {model}: code {lic['code']}; weights {lic['weights']} "
                     f"(commercial use: {lic['commercial_use']})"
                     + (f"; credit: {lic['attribution']}" if lic["attribution"] else ""))
    lines.append("tools: " + ", ".join(f"{k} {v}" for k, v in s["tools"].items()))
    return "\n".join(lines)
