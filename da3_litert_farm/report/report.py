"""Report stage: the catalog as a page an app team opens in a browser.

Run by the DVC stage in stages/report.py.

Writes artifacts/report/index.html and its PNG images (relative links only: the page opens
from the file system or any static host, with no script, CDN or server). Each bundle (a model at a
tier): its size against the files it replaces and what each aspect adds to it. Per catalogued cell:
a table row (shape, size, sha256, MACs, CPU and GPU fidelity, stage times), the letterbox
penalty, and per validation photo the app-preprocessed input, the official depth, the shipped
model's depth on the GPU accelerator (on the CPU where the GPU check was skipped, labelled so)
and the relative-error map between the two, each with its scale.

Also writes the headline figures per cell for DVC: artifacts/summary/<cell>.json (`dvc
metrics show|diff`: one row per cell) and artifacts/plots.json (`dvc plots show|diff`, defined
in dvc.yaml).
Everything it shows was recorded by an earlier stage; nothing is measured here.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import paths
from da3_litert_farm.core.pipeline import PER_CELL_STAGES, stage_seconds
from da3_litert_farm.checks.agreement import relative_error
from da3_litert_farm.model.photo_input import cover_and_center_crop, load_photo
from da3_litert_farm.report.ladder import Point, ladder_svg
from da3_litert_farm.report.report_images import (ERROR_COLORS, Scale, as_plane, colorize, depth_scale, error_scale,
                                           scale_bar, write_png)

IMAGES = paths.REPORT_IMAGES.relative_to(paths.REPORT_DIR).as_posix()  # the page links its images relative to itself


class ReportError(FarmError, RuntimeError):
    pass


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"{path} is missing: run `dvc repro` (the report shows what the stages recorded)") from None


def cell_record(model: dict) -> dict:
    """Everything the page and the DVC files show about one catalogued model."""
    name = model["cell"]
    metrics, gpu = read_json(paths.metrics(name)), read_json(paths.gpu_metrics(name))
    return {"model": model, "metrics": metrics, "gpu": gpu, "macs": read_json(paths.lint_report(name))["macs"],
            "seconds": stage_seconds(name)}


def summary(records: list[dict]) -> dict:
    """A handful of numbers per cell, in units that stay readable at DVC's 5 decimals."""
    out = {}
    for r in records:
        m, gpu, box = r["model"], r["gpu"], r["metrics"]["letterbox"]
        row = {
            "megabytes": round(m["bytes"] / 1e6, 3),
            "gmacs": round(r["macs"] / 1e9, 3),
            **({"cpu_ms": round(r["metrics"]["cpu_inference"]["ms"], 1)} if "cpu_inference" in r["metrics"] else {}),
            "cpu_1_minus_pearson_ppm": (1 - m["fidelity"]["pearson_min"]) * 1e6,
            "cpu_mean_rel_error_pct": m["fidelity"]["mean_rel_error_max"] * 100,
        }
        if gpu["checked"]:
            row["gpu_1_minus_pearson_ppm"] = (1 - gpu["pearson_min"]) * 1e6
            row["gpu_mean_rel_error_pct"] = gpu["mean_rel_max"] * 100
            for mode, figures in gpu.get("modes", {}).items():
                row[f"gpu_{mode}_1_minus_pearson_ppm"] = (1 - figures["pearson_min"]) * 1e6
                row[f"gpu_{mode}_mean_rel_error_pct"] = figures["mean_rel_max"] * 100
        if box:
            row["letterbox_pearson"] = box["pearson_min"]
            row["letterbox_mean_rel_error_pct"] = box["mean_rel_error_max"] * 100
            row["letterbox_mac_ratio"] = box["mac_ratio_square_to_native"]
        out[m["cell"]] = row
    return out


def plot_rows(figures: dict) -> list[dict]:
    """The summary as one row per cell (DVC plots read a list of records)."""
    return [{"cell": cell, **row} for cell, row in figures.items()]


def load_maps(path: Path, suffix: str = "") -> dict[str, np.ndarray]:
    try:
        with np.load(path) as maps:
            return {f"{key}{suffix}": maps[key] for key in maps.files}
    except FileNotFoundError:
        raise ReportError(f"{path} is missing: run `dvc repro` (the report shows what the stages recorded)") from None


def render_photos(record: dict, images: Path) -> list[dict]:
    """Write the four pictures of each validation photo into `images`; return what the page says about them."""
    name, height, width = record["model"]["cell"], record["model"]["height"], record["model"]["width"]
    gpu = record["gpu"]
    maps = load_maps(paths.depth_maps(name)) | load_maps(paths.gpu_depth(name), ".gpu")
    rows = []
    cpu_only = "not in validation.gpu_photos" if gpu["checked"] else "the GPU check was skipped"
    for photo, cpu_figures in record["metrics"]["fidelity"]["photos"].items():
        official = as_plane(maps[f"{photo}.official"])
        on_gpu = f"{photo}.gpu" in maps
        shipped = as_plane(maps[f"{photo}.gpu" if on_gpu else f"{photo}.cpu"])
        figures = gpu["photos"][photo] if on_gpu else cpu_figures
        error = relative_error(shipped, official)
        depth, err = depth_scale(official), error_scale(error)
        files = {kind: f"{name}/{photo}-{kind}.png" for kind in ("input", "official", "shipped", "error")}
        pictures = {"input": cover_and_center_crop(load_photo(photo), height, width),
                    "official": colorize(official, depth), "shipped": colorize(shipped, depth),
                    "error": colorize(error, err)}
        for kind, rgb in pictures.items():
            write_png(images / files[kind], rgb)
        rows.append({"photo": photo, "files": files, "depth": depth, "error": err, "figures": figures,
                     "where": "GPU accelerator, FP16" if on_gpu else f"CPU (XNNPACK): {cpu_only}"})
    return rows


# ---- the page -------------------------------------------------------------------------------------

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d1d1f; max-width: 1400px; }
h1 { margin-bottom: 4px; } h2 { margin-top: 32px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eee; white-space: nowrap; }
th { text-align: left; background: #f5f5f7; white-space: normal; vertical-align: bottom; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.warning { background: #fff0f0; border: 2px solid #c62828; color: #8e0000; padding: 10px 14px; font-weight: 600; }
.photo { display: flex; gap: 16px; flex-wrap: wrap; margin: 8px 0 24px; }
figure { margin: 0; width: 300px; }
img.map { width: 300px; height: 240px; object-fit: contain; object-position: left top; display: block; }
figcaption { font-size: 12px; color: #555; }
.bar { display: flex; align-items: center; gap: 4px; font-size: 11px; margin-top: 4px; }
.bar img { width: 180px; height: 10px; }
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def sci(x: float | None) -> str:
    return "-" if x is None else f"{x:.1e}"


def cells(values: list[tuple[object, bool]]) -> str:
    """<td>s; True marks a number (right-aligned)."""
    return "".join(f'<td class="n">{esc(v)}</td>' if numeric else f"<td>{esc(v)}</td>" for v, numeric in values)


def cpu_ms(metrics: dict) -> str:
    """One inference on the farm machine's CPU (XNNPACK), as validate@ASPECT timed it."""
    timed = metrics.get("cpu_inference")  # absent from a build made before the farm timed it
    return f"{timed['ms']:.0f}" if timed else "-"


def other_modes(gpu: dict) -> str:
    """The figures of each GPU mode beside the default (validation.gpu_modes), the recommended one marked."""
    return "; ".join(f"{mode}: {sci(1 - m['pearson_min'])}, {sci(m['mean_rel_max'])}"
                     + (" (recommended)" if mode == gpu["recommended_mode"] else "")
                     for mode, m in gpu.get("modes", {}).items()) or "-"


def npu_chips(model: dict) -> str:
    """The Qualcomm chips a cell was compiled for, each simulated one with its figures against the official model."""
    npu = model.get("npu") or {}
    if not npu.get("compiled"):
        return "-"
    return ", ".join(soc + (f" ({sci(1 - t['simulator']['pearson_min'])}, {sci(t['simulator']['mean_rel_max'])}"
                            + (f"; proxy {t['simulator']['shape']}" if t["simulator"]["proxy"] else "") + ")"
                            if t.get("simulator") else "") for soc, t in npu["targets"].items())


def models_table(records: list[dict]) -> str:
    head = ("cell", "H x W", "MB", "sha256", "GMACs", "CPU ms", "GPU s", "export peak MiB", "CPU 1 - r",
            "CPU mean rel", "GPU 1 - r", "GPU mean rel",
            "GPU adapter, precision", "other GPU modes: 1 - r, mean rel",
            "NPU chips (HTP simulator: 1 - r, mean rel)", f"seconds: {' / '.join(PER_CELL_STAGES)}")
    rows = []
    for r in records:
        m, gpu = r["model"], r["gpu"]
        checked, cost = gpu["checked"], m.get("cost", {})  # cost: absent from a build made before the farm measured it
        seconds = " / ".join("-" if r["seconds"][s] is None else f"{r['seconds'][s]:.0f}" for s in PER_CELL_STAGES)
        rows.append(f'<tr data-cell="{esc(m["cell"])}">' + cells([
            (m["cell"], False), (f"{m['height']} x {m['width']}", False), (f"{m['bytes'] / 1e6:.1f}", True),
            (m["sha256"][:12], False), (f"{r['macs'] / 1e9:.2f}", True), (cpu_ms(r["metrics"]), True),
            (cost.get("gpu_seconds", "-"), True), (cost.get("export_peak_rss_mib", "-"), True),
            (sci(1 - m["fidelity"]["pearson_min"]), True), (sci(m["fidelity"]["mean_rel_error_max"]), True),
            (sci(1 - gpu["pearson_min"]) if checked else "-", True), (sci(gpu["mean_rel_max"]) if checked else "-", True),
            (f"{gpu['adapter']['name'].split(' (')[0]}, {gpu['precision']}"
             + (" (recommended)" if gpu.get("modes") and gpu["recommended_mode"] == gpu["precision"] else "")
             if checked else f"skipped: {gpu['reason']}", False),
            (other_modes(gpu), False), (npu_chips(m), False), (seconds, True)]) + "</tr>")
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f'<table id="models"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def ladder_section(records: list[dict]) -> str:
    """Each file's GPU fidelity (FP16, the default mode; the CPU's where the GPU check was skipped) against its
    GMAC per inference."""
    on_gpu = all(r["gpu"]["checked"] for r in records)
    points = [Point(r["model"]["cell"], r["macs"] / 1e9,
                    1 - (r["gpu"]["pearson_min"] if on_gpu else r["model"]["fidelity"]["pearson_min"]),
                    f"({r['model']['height']} x {r['model']['width']}, CPU {cpu_ms(r['metrics'])} ms)")
              for r in records]
    where = "GPU accelerator, FP16" if on_gpu else "CPU (the GPU check was skipped)"
    return ladder_svg(points, "GMAC per inference", f"1 - r on the {where}")


def letterbox_table(records: list[dict]) -> str:
    head = ("cell", "native", "square instead", "Pearson (worst photo)", "mean rel error (worst)",
            "GMACs native", "GMACs square", "square / native")
    rows = []
    for r in records:
        m, box = r["model"], r["metrics"]["letterbox"]
        if not box:
            rows.append(f'<tr data-cell="{esc(m["cell"])}"><td>{esc(m["cell"])}</td>'
                        f'<td colspan="7">square already: no letterbox</td></tr>')
            continue
        rows.append(f'<tr data-cell="{esc(m["cell"])}">' + cells([
            (m["cell"], False), (f"{m['height']} x {m['width']}", False), (" x ".join(map(str, box["square"])), False),
            (f"{box['pearson_min']:.4f}", True), (f"{box['mean_rel_error_max']:.3f}", True),
            (f"{box['macs_native'] / 1e9:.1f}", True), (f"{box['macs_square'] / 1e9:.1f}", True),
            (f"{box['mac_ratio_square_to_native']:.2f}x", True)]) + "</tr>")
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f'<table id="letterbox"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def bundle_section(catalog: dict) -> str:
    """Each bundle (one model at one tier): its size against the files it replaces, and what each aspect adds."""
    bundles = catalog.get("bundles") or []
    return "".join(_bundle(b, catalog) for b in bundles) or "<p>This catalog has no bundle.</p>"


def _bundle(bundle: dict, catalog: dict) -> str:
    models = {m["cell"]: m for m in catalog["models"]}
    rows = "".join(f'<tr data-cell="{esc(s["cell"])}">' + cells([
        (s["signature"], False), (f"{s['height']} x {s['width']}", False),
        (f"{models[s['cell']]['bytes'] / 1e6:.1f}", True), (f"{s['own_bytes'] / 1e6:.2f}", True)]) + "</tr>"
        for s in bundle["signatures"])
    load = "; ".join(
        f"{acc.upper()}: load {c['bundle']['seconds']:.1f} s and +{c['bundle']['peak_growth_mib']:.0f} MiB peak "
        + (f"(signature {c['bundle_one_signature']['signature']} alone, as LiteRT's C API can prepare it: "
           f"{c['bundle_one_signature']['seconds']:.1f} s, +{c['bundle_one_signature']['peak_growth_mib']:.0f} MiB; "
           if "bundle_one_signature" in c else "(")
        + f"one file, {c['single']['cell']}: {c['single']['seconds']:.1f} s, +{c['single']['peak_growth_mib']:.0f} MiB)"
        for acc, c in bundle["load"].items())
    gpu = bundle["gpu"]
    gpu_text = (f"On the GPU accelerator it loads fully accelerated, and signature {gpu['signature']} returned, bit for "
                f"bit, what its own file returned ({gpu['photo']})." if gpu["checked"] and gpu.get("bitwise_equal")
                else f"GPU: {gpu.get('reason', 'not checked')}.")
    name = bundle["bundle"]
    return (f'<h3>{esc(name)}</h3><p class="bundle-size" id="bundle-size-{esc(name)}">Model {esc(bundle["model"])} at '
            f'long side {bundle["tier"]}, every aspect in one file, <code>{esc(bundle["file"])}</code>: '
            f'<b>{bundle["bytes"] / 1e6:.1f} MB</b> instead of {bundle["singles_bytes"] / 1e6:.1f} MB for the '
            f'{len(bundle["signatures"])} files ({bundle["bytes"] / bundle["singles_bytes"]:.2f}x): the FP16 weights '
            f'are stored once. Each signature is its file\'s graph, byte for byte, and its CPU output is bitwise its '
            f'file\'s. {esc(gpu_text)} Loading it whole compiles every signature (LiteRT\'s Python and Kotlin APIs): '
            f'{esc(load)}.</p>'
            f'<table class="bundle" id="bundle-{esc(name)}"><thead><tr><th>signature</th><th>H x W</th>'
            f'<th>own file, MB</th><th>adds to the bundle, MB</th></tr></thead><tbody>{rows}</tbody></table>')


def bar(scale: Scale, unit: str = "") -> str:
    fmt = (lambda v: f"{v * 100:.2g}%") if unit == "%" else (lambda v: f"{v:.3g}")
    return (f'<div class="bar"><span>{esc(fmt(scale.low))}</span><img src="{IMAGES}/scale-{esc(scale.colors)}.png" '
            f'alt="{esc(scale.colors)} colour scale"><span>{esc(fmt(scale.high))}</span></div>')


def photo_block(aspect: str, row: dict) -> str:
    f, files = row["figures"], row["files"]

    def figure(kind: str, caption: str, scale_html: str = "") -> str:
        src = esc(f"{IMAGES}/{files[kind]}")
        return (f'<figure><a href="{src}"><img class="map" src="{src}" '
                f'alt="{esc(aspect)} {esc(row["photo"])} {kind}"></a>{scale_html}'
                f"<figcaption>{caption}</figcaption></figure>")

    return (f'<h4>{esc(row["photo"])}</h4><div class="photo">'
            + figure("input", "input, preprocessed as the app does (cover, centre crop)")
            + figure("official", "official PyTorch model, FP32 (depth, near = blue)", bar(row["depth"]))
            + figure("shipped", f"shipped .tflite on the {esc(row['where'])}", bar(row["depth"]))
            + figure("error", f"relative error |shipped - official| / official: 1 - r {sci(1 - f['pearson'])}, "
                              f"mean {sci(f['mean_rel_error'])}", bar(row["error"], "%"))
            + "</div>")


def checkpoint_text(checkpoint: dict) -> str:
    where = {"hub": f"Hugging Face {checkpoint.get('repo')} @ {checkpoint.get('resolved_revision') or checkpoint.get('revision')}",
             "local": f"local {checkpoint.get('path')}",
             "random": f"random stress weights, seed {checkpoint.get('seed')}"
                       + (" with outlier channels" if checkpoint.get("outliers") else "")}.get(checkpoint["source"], checkpoint["source"])
    return f"{where}; weights sha256 {checkpoint['weights_sha256'][:16]}"


def sources_text(catalog: dict) -> str:
    """Where each model's weights came from."""
    presets = {m["model"]: m["output"]["model"] for m in catalog["models"]}
    return "; ".join(f"Model {model} ({presets.get(model, '?')}): {checkpoint_text(s['checkpoint'])}"
                     for model, s in catalog["sources"].items())


def page(catalog: dict, records: list[dict], photo_rows: dict[str, list[dict]]) -> str:
    warning = (f'<div class="warning" role="alert" id="warning">{esc(catalog["warning"])}</div>'
               if catalog.get("warning") else "")
    sections = "".join(
        f'<section class="cell" id="cell-{esc(r["model"]["cell"])}"><h3>{esc(r["model"]["cell"])}: '
        f'{r["model"]["height"]} x {r["model"]["width"]}</h3>'
        + "".join(photo_block(r["model"]["cell"], row) for row in photo_rows[r["model"]["cell"]]) + "</section>"
        for r in records)
    tools = ", ".join(f"{k} {v}" for k, v in catalog["tools"].items())
    adapters = ", ".join(sorted({m["gpu"]["adapter"] for m in catalog["models"] if m["gpu"]["checked"]})) or "none (skipped)"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(catalog['name'])} {esc(catalog['version'])}: report</title><link rel="icon" href="data:,">
<style>{STYLE}</style></head><body>
<h1>{esc(catalog['name'])} <span id="version">{esc(catalog['version'])}</span></h1>
<p>Catalog built {esc(catalog['created'])}. {esc(sources_text(catalog))}.<br>
<small>{esc(tools)}</small></p>
{warning}
<h2>Models</h2>
<p>One FP16-weight .tflite per cell (model, tier, aspect: MODEL-TIER-ASPECT). 1 - r is one minus the Pearson correlation with the official FP32 model and
the mean relative error is per pixel, both on the worst validation photo. GMACs: multiply-accumulates per inference,
counted from the .tflite graph. Stage times are this build's wall-clock seconds. The GPU adapter in full:
{esc(adapters)}.</p>
{models_table(records)}
<h2>Cost and fidelity</h2>
<p>Each file's worst-photo 1 - r against what one inference costs: a cheaper file (a lower long side) sits to the
left; hover a point for its shape and CPU milliseconds.</p>
{ladder_section(records)}
<h2>Bundles: each model and tier in one file</h2>
{bundle_section(catalog)}
<h2>Letterbox penalty: one square model instead</h2>
<p>The official model at each aspect's own shape, against the same model run on the same photo letterboxed into a
square of the same long side (zero padding, centred; the depth cropped back to the aspect's region at native scale and
aligned by its median ratio). This is what a model per aspect saves.</p>
{letterbox_table(records)}
<h2>Depth maps</h2>
<p>Official and shipped depth share one colour range per photo (the official map's 1st-99th percentile);
the error map runs from no error (black) to the photo's largest error.</p>
{sections}
</body></html>
"""


def build(catalog: dict, images: Path) -> tuple[str, dict]:
    """Write the images into `images` (a fresh folder); return the page and the DVC summary."""
    records = [cell_record(m) for m in catalog["models"]]
    photo_rows = {r["model"]["cell"]: render_photos(r, images) for r in records}
    for colors in {row["depth"].colors for rows in photo_rows.values() for row in rows} | {ERROR_COLORS}:
        write_png(images / f"scale-{colors}.png", scale_bar(colors))
    return page(catalog, records, photo_rows), summary(records)
