"""What one cell costs, fitted to the farm's recorded builds: the one place that turns docs/figures/*.json into
estimates (config.cost_plan adds them up for params.yaml and refuses what this machine cannot hold).

The family recording (family-matrix.json, `python -m da3_litert_farm.dev.figures catalog CATALOG --cost --record
family-matrix`) holds, per built cell, its preset, shape, GMAC, file MB, export seconds and peak RSS and GPU seconds
per inference. Per preset, by least squares over its recorded cells:
- GMAC = a T + b T^2 in the cell's patch tokens T: the ViT's per-token layers, and its attention, quadratic in T
  (b = 0 where the preset was recorded at one token count);
- every other column a line in GMAC whose slope is at least 0: a larger cell is never estimated cheaper.
A preset without a recording borrows one of the same ViT (its width, and its head where one has it) and says so.
The files the recording does not size are ratios to the FP16 file: the FP32 flatbuffer (bench.json; the patched
program holds the same FP32 weights and is taken as its size), an NPU file at the NPU recording's shape
(npu-896x504.json, of the shipped preset) and a bundle to its largest file (the family recording's bundle rows).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from da3_litert_farm.core.aspects import PATCH
from da3_litert_farm.core.models import DEFAULT_PRESET, PRESETS

FIGURES = Path(__file__).resolve().parents[2] / "docs" / "figures"
FAMILY, BENCH, NPU = "family-matrix.json", "bench.json", "npu-896x504.json"
COLUMNS = ("MB", "export s", "export peak RSS MiB", "GPU s")  # the family recording's, fitted in GMAC


def tokens(height: int, width: int) -> int:
    return (height // PATCH) * (width // PATCH)


@dataclass(frozen=True)
class Line:
    intercept: float
    slope: float

    def __call__(self, x: float) -> float:
        return self.intercept + self.slope * x


def fit_line(points: list[tuple[float, float]]) -> Line:
    """Least squares y = c + s x with s >= 0 (through the mean where the points fall or share one x)."""
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in points) / sxx) if sxx else 0.0
    return Line(my - slope * mx, slope)


def fit_gmac(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares (a, b) of GMAC = a T + b T^2 over (T, GMAC) points; b = 0 with a single T."""
    s2, s3, s4 = (sum(t ** k for t, _ in points) for k in (2, 3, 4))
    g1, g2 = (sum(g * t ** k for t, g in points) for k in (1, 2))
    if len({t for t, _ in points}) < 2:
        return g1 / s2, 0.0
    det = s2 * s4 - s3 * s3
    return (g1 * s4 - g2 * s3) / det, (s2 * g2 - s3 * g1) / det


@dataclass(frozen=True)
class PresetCost:
    recorded: str  # the preset whose recorded cells these are
    gmac: tuple[float, float]  # (a, b)
    lines: dict[str, Line]  # a column of COLUMNS -> its line in GMAC

    def at(self, height: int, width: int) -> dict[str, float]:
        """The cell's GMAC and every column of COLUMNS (none below 0: a line through small cells may start there)."""
        a, b = self.gmac
        t = tokens(height, width)
        gmac = a * t + b * t * t
        return {"GMAC": gmac, **{column: max(0.0, line(gmac)) for column, line in self.lines.items()}}


@dataclass(frozen=True)
class CostModel:
    source: str  # "family-matrix.json (DATE, CPU)": what every estimate is said to come from
    presets: dict[str, PresetCost]  # the recorded presets
    fp32_per_fp16: float  # an FP32 flatbuffer's bytes over its FP16 file's
    bundle_per_largest: float  # a bundle's bytes over its largest file's
    npu_per_fp16: float | None  # an NPU file's bytes over the FP16 file's at the same shape; None: not recorded

    def preset(self, name: str) -> PresetCost | None:
        """The figures for preset `name`: its own, or the closest recorded preset's (same width, then same head)."""
        if name in self.presets:
            return self.presets[name]
        want = PRESETS[name]
        alike = [p for p in self.presets if PRESETS[p].embed_dim == want.embed_dim]
        alike.sort(key=lambda p: PRESETS[p].head != want.head)
        return self.presets[alike[0]] if alike else None


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def load(figures: Path = FIGURES) -> CostModel:
    """The model fitted to the recordings in `figures`; OSError or ValueError where the family's or the bench's is
    missing or unreadable (the NPU recording may be)."""
    family = _read(figures / FAMILY)
    rows = [r for r in family["figures"] if "model" in r]
    presets = {}
    for name in dict.fromkeys(r["model"] for r in rows):
        own = [r for r in rows if r["model"] == name]
        shapes = [tuple(int(v) for v in r["H x W"].split(" x ")) for r in own]
        gmac = fit_gmac([(tokens(*s), r["GMAC"]) for s, r in zip(shapes, own)])
        presets[name] = PresetCost(name, gmac, {c: fit_line([(r["GMAC"], r[c]) for r in own if c in r])
                                                for c in COLUMNS})
    bundles = [r["x the largest file"] for r in family["figures"] if "x the largest file" in r]
    sizes = {r["quantity"]: r["value"] for r in _read(figures / BENCH)["figures"]}
    on = family["measured_on"]
    return CostModel(source=f"{FAMILY} ({on['date']}, {on['cpu']})", presets=presets,
                     fp32_per_fp16=sizes["size FP32"] / sizes["size FP16"],
                     bundle_per_largest=max(bundles, default=1.0),
                     npu_per_fp16=_npu_ratio(figures / NPU, presets.get(DEFAULT_PRESET)))


def _npu_ratio(path: Path, shipped: PresetCost | None) -> float | None:
    """The NPU recording's median MB per chip over the shipped preset's FP16 file at its shape."""
    try:
        rows = [r for r in _read(path)["figures"] if "compile s" in r]
    except (OSError, ValueError):
        return None
    if not rows or shipped is None:
        return None
    height, width = (int(v) for v in rows[0]["shape"].split(" x "))
    return statistics.median(r["MB"] for r in rows) / shipped.at(height, width)["MB"]


def expected(preset: str, height: int, width: int, column: str, times: int = 1, figures: Path = FIGURES) -> str:
    """How long a stage expects to run, said as the estimate it is: `times` x the cell's `column` ("export s",
    "GPU s"), e.g. "expected about 3.2 min (estimated from family-matrix.json (DATE, CPU))"; '' without a
    recording. What a stage prints beside its progress; config.cost_plan adds the same figures up before a build."""
    try:
        model = load(figures)
    except (OSError, ValueError, KeyError):
        return ""
    fit = model.preset(preset)
    if fit is None:
        return ""
    seconds = times * fit.at(height, width)[column]
    borrowed = "" if fit.recorded == preset else f", as {fit.recorded}"
    said = "under 1 s" if seconds < 1 else f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
    return f"expected about {said} (estimated from {model.source}{borrowed})"
