"""How closely a depth map (or an intermediate tensor) agrees with the reference, and the gates on
it: numpy only, so the report can draw the same per-pixel error that the fidelity figures average
and the GPU stage gates without loading PyTorch."""

from __future__ import annotations

import numpy as np


def relative_error(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|pred - ref| / |ref| per pixel (float64): its mean is `compare`'s mean_rel_error."""
    p, r = np.asarray(pred, np.float64), np.asarray(ref, np.float64)
    return np.abs(p - r) / np.maximum(np.abs(r), 1e-12)


def relative_rms(pred: np.ndarray, ref: np.ndarray) -> float:
    """||pred - ref|| / ||ref|| over all elements (float64): for tensors that are not depth maps."""
    p, r = np.asarray(pred, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(p - r) / max(np.linalg.norm(r), 1e-30))


def compare(pred: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Agreement of a depth map with the reference (float64 math)."""
    p = np.asarray(pred, np.float64).ravel()
    r = np.asarray(ref, np.float64).ravel()
    if p.shape != r.shape:
        raise ValueError(f"shape mismatch: {pred.shape} vs {ref.shape}")
    pc, rc = p - p.mean(), r - r.mean()
    return {
        "pearson": float(pc @ rc / np.sqrt((pc @ pc) * (rc @ rc))),
        "cosine": float(p @ r / np.sqrt((p @ p) * (r @ r))),
        "max_abs_error": float(np.abs(p - r).max()),
        "mean_rel_error": float(np.mean(relative_error(p, r))),
    }


def worst_case(per_photo: dict[str, dict[str, float]]) -> dict[str, float]:
    """The least favourable value of each metric over the photos."""
    rows = per_photo.values()
    return {
        "pearson": min(r["pearson"] for r in rows),
        "cosine": min(r["cosine"] for r in rows),
        "max_abs_error": max(r["max_abs_error"] for r in rows),
        "mean_rel_error": max(r["mean_rel_error"] for r in rows),
    }


def gate_fidelity(per_photo: dict[str, dict[str, float]], min_pearson: float, max_mean_rel: float,
                  keys: tuple[str, str]) -> tuple[dict, list[str]]:
    """Gate every photo on Pearson (shape of the depth map) and mean relative error (its scale
    and offset too: Pearson alone passes a depth map off by a factor). Returns the measured
    outcome of each gate and one failure message per photo and figure; `keys` name the
    params.yaml settings in those messages."""
    failures = []
    for photo, m in per_photo.items():
        if not m["pearson"] >= min_pearson:  # written so that NaN fails
            failures.append(f"pearson {m['pearson']:.7f} on photo {photo!r} < gate {keys[0]} {min_pearson}")
        if not m["mean_rel_error"] <= max_mean_rel:
            failures.append(f"mean relative error {m['mean_rel_error']:.2e} on photo {photo!r} > gate {keys[1]} "
                            f"{max_mean_rel}")
    worst = worst_case(per_photo)
    gates = {
        "min_pearson": {"limit": min_pearson, "value": worst["pearson"],
                        "passed": all(m["pearson"] >= min_pearson for m in per_photo.values())},
        "max_mean_rel": {"limit": max_mean_rel, "value": worst["mean_rel_error"],
                         "passed": all(m["mean_rel_error"] <= max_mean_rel for m in per_photo.values())},
    }
    return gates, failures
