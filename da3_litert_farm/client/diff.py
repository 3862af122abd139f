"""`farm diff`: what changed, cell by cell (model, tier and aspect), between two published catalog versions: the
file, its shape, its size, its CPU and GPU fidelity."""

from __future__ import annotations

from da3_litert_farm.client.catalog import read_catalog


def diff(repo: str, old: str, new: str) -> list[dict]:
    """Per cell (model, tier and aspect), what changed between two catalog versions."""
    a = {m["cell"]: m for m in read_catalog(repo, old)["models"]}
    b = {m["cell"]: m for m in read_catalog(repo, new)["models"]}
    rows = []
    for cell in sorted(set(a) | set(b)):
        if cell not in b:
            rows.append({"cell": cell, "change": "removed", "shape": _shape(a[cell])})
        elif cell not in a:
            rows.append({"cell": cell, "change": "added", "shape": _shape(b[cell]),
                         "bytes": b[cell]["bytes"], "pearson_min": b[cell]["fidelity"]["pearson_min"],
                         "gpu_pearson_min": _gpu_pearson(b[cell])})
        else:
            x, y = a[cell], b[cell]
            gx, gy = _gpu_pearson(x), _gpu_pearson(y)
            rows.append({
                "cell": cell,
                "change": "changed" if x["sha256"] != y["sha256"] else "same",
                "shape": _shape(x) if _shape(x) == _shape(y) else f"{_shape(x)} -> {_shape(y)}",
                "bytes": y["bytes"], "bytes_delta": y["bytes"] - x["bytes"],
                "pearson_min": y["fidelity"]["pearson_min"],
                "pearson_delta": y["fidelity"]["pearson_min"] - x["fidelity"]["pearson_min"],
                "gpu_pearson_min": gy,
                "gpu_pearson_delta": gy - gx if gx is not None and gy is not None else None,
                "sha256": f"{x['sha256'][:12]} -> {y['sha256'][:12]}" if x["sha256"] != y["sha256"] else x["sha256"][:12],
            })
    return rows


def _gpu_pearson(m: dict) -> float | None:
    """Worst GPU-FP16 Pearson, or None where the GPU check was skipped (or predates the farm's)."""
    gpu = m.get("gpu") or {}
    return gpu.get("pearson_min") if gpu.get("checked") else None


def _gpu_text(value: float | None, delta: float | None = None) -> str:
    if value is None:
        return "not checked"
    return f"{value:.7f}" + (f" ({delta:+.1e})" if delta is not None else "")


def _shape(m: dict) -> str:
    return f"{m['height']}x{m['width']}"


def format_diff(rows: list[dict], old: str, new: str) -> str:
    width = max([len("cell"), *(len(r["cell"]) for r in rows)])
    lines = [f"catalog {old} -> {new}",
             f"{'cell':<{width}} {'change':<8} {'shape HxW':<16} {'size':>22} {'pearson_min CPU':>24} "
             f"{'pearson_min GPU FP16':>24}  sha256"]
    for r in rows:
        size = pearson = gpu = sha = ""
        if "bytes_delta" in r:
            size = f"{r['bytes'] / 1e6:.2f} MB ({r['bytes_delta'] / 1e6:+.2f})"
            pearson = f"{r['pearson_min']:.7f} ({r['pearson_delta']:+.1e})"
            gpu = _gpu_text(r["gpu_pearson_min"], r["gpu_pearson_delta"])
            sha = r["sha256"]
        elif "bytes" in r:
            size, pearson = f"{r['bytes'] / 1e6:.2f} MB", f"{r['pearson_min']:.7f}"
            gpu = _gpu_text(r["gpu_pearson_min"])
        lines.append(f"{r['cell']:<{width}} {r['change']:<8} {r['shape']:<16} {size:>22} {pearson:>24} {gpu:>24}  "
                     f"{sha}")
    return "\n".join(lines)
