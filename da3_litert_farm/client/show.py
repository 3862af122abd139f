"""`farm show`: what a published catalog version holds, as a table or as JSON (standard library only)."""

from __future__ import annotations

from da3_litert_farm.core.licensing import catalog_license
from da3_litert_farm.core.releases import stress_warning


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
            "photos": sorted(gpu["photos"]), "adapter": gpu["adapter"], "precision": gpu["precision"]}


def summary(catalog: dict) -> dict:
    """The version, one row per model (and the bundle), the weights and the tools that built it."""
    rows = [{"aspect": m["aspect"], "ratio": m["ratio"], "height": m["height"], "width": m["width"],
             "megabytes": round(m["bytes"] / 1e6, 2), "sha256": m["sha256"],
             "cpu": {"one_minus_pearson": 1 - m["fidelity"]["pearson_min"],
                     "mean_rel_max": m["fidelity"]["mean_rel_error_max"],
                     "photos": sorted(m["fidelity"]["photos"])},
             "gpu": _gpu(m)}
            for m in catalog["models"]]
    bundle = catalog.get("bundle")
    return {
        "name": catalog["name"], "version": catalog["version"], "created": catalog.get("created"),
        "weights": weights(catalog), "warning": stress_warning(catalog),
        "models": rows,
        "bundle": {"megabytes": round(bundle["bytes"] / 1e6, 2), "sha256": bundle["sha256"],
                   "signatures": [s["signature"] for s in bundle["signatures"]]} if bundle else None,
        "license": catalog_license(catalog),
        "tools": catalog.get("tools", {}),
    }


def format_summary(s: dict) -> str:
    w = s["weights"]
    lines = [f"{s['name']} {s['version']} (created {s['created']})",
             f"weights: {w['kind']}: {w['origin']}" + (f", sha256 {w['weights_sha256'][:12]}" if w["weights_sha256"]
                                                        else "")]
    if s["warning"]:
        lines.append(f"WARNING: {s['warning']}")
    lines.append(f"{'aspect':<10} {'HxW':>9} {'MB':>7}  {'sha256':<12}  {'CPU 1-r':>8} {'CPU rel':>8}  "
                 f"{'GPU 1-r':>8} {'GPU rel':>8}  GPU adapter (photos)")
    for r in s["models"]:
        cpu, gpu = r["cpu"], r["gpu"]
        gpu_text = (f"{gpu['one_minus_pearson']:>8.1e} {gpu['mean_rel_max']:>8.1e}  {gpu['adapter']} "
                    f"({', '.join(gpu['photos'])})" if gpu["checked"] else f"{'not checked':>17}  {gpu['reason']}")
        lines.append(f"{r['aspect']:<10} {r['height']:>4}x{r['width']:<4} {r['megabytes']:>7.2f}  {r['sha256'][:12]}  "
                     f"{cpu['one_minus_pearson']:>8.1e} {cpu['mean_rel_max']:>8.1e}  {gpu_text}")
    if s["bundle"]:
        b = s["bundle"]
        lines.append(f"{'bundle':<10} {'':>9} {b['megabytes']:>7.2f}  {b['sha256'][:12]}  signatures "
                     f"{', '.join(b['signatures'])}")
    lines.append("1-r: 1 - Pearson r, worst photo; rel: mean relative error, worst photo; both against the official "
                 "FP32 model (CPU: XNNPACK; GPU: LiteRT's GPU accelerator, FP16)")
    lic = s["license"]
    lines.append(f"license: code {lic['code']}; weights {lic['weights']}"
                 + (f"; credit: {lic['attribution']}" if lic["attribution"] else ""))
    lines.append("tools: " + ", ".join(f"{k} {v}" for k, v in s["tools"].items()))
    return "\n".join(lines)
