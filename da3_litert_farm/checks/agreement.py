"""How closely a depth map (or an intermediate tensor) agrees with the reference: numpy only, so
the report can draw the same per-pixel error that the fidelity figures average."""

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
