"""Aspect planner: the one place where an aspect entry becomes a model input shape.

An entry is either `ratio: "W:H"` (e.g. "9:16" is portrait, "9:19.5" allowed), planned at each
tier's long side, or explicit `height` and `width`. For a ratio, the long side equals the tier
and the short side is the multiple of 14 (the ViT patch) nearest to tier * short / long (halves
round up).

An entry's keys, types and sides are checked by the params schema first
(da3_litert_farm/config/params.schema.json, with the constants below); the planner adds the
rules across keys and the ratio's arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from da3_litert_farm.core.errors import FarmError

PATCH = 14
MIN_SIDE = PATCH * 4  # 56: below this the DPT head's 4 pyramid levels collapse
MAX_SIDE = 2016  # 144 patches: far past what a phone GPU holds for global attention
DEFAULT_LONG_SIDE = 896
# Each name becomes part of a git tag: no '..', no trailing '.' or '.lock'.
ASPECT_NAME = r"^(?!.*\.\.)(?!.*\.(?:lock)?$)[A-Za-z0-9][A-Za-z0-9_.-]*$"
BUNDLE = "bundle"  # names the file of all aspects (artifact <catalog>-bundle), so no aspect may be named so


class AspectError(FarmError, ValueError):
    """An aspect entry that cannot become a shape; the message names the aspect and rule."""


@dataclass(frozen=True)
class Shape:
    height: int
    width: int

    @property
    def patches(self) -> tuple[int, int]:
        return self.height // PATCH, self.width // PATCH

    def __str__(self) -> str:
        return f"{self.height}x{self.width}"


@dataclass(frozen=True)
class Aspect:
    name: str
    ratio: str  # "W:H" as configured, or reduced from explicit sizes
    shape: Shape

    @property
    def height(self) -> int:
        return self.shape.height

    @property
    def width(self) -> int:
        return self.shape.width

    @property
    def long_side(self) -> int:
        """The resolution tier: files of one long side cost about the same whatever their ratio."""
        return max(self.shape.height, self.shape.width)

    def at_long_side(self, long_side: int) -> "Aspect":
        """The same ratio planned at another tier (AspectError where its short side would be too small)."""
        ratio_w, ratio_h = parse_ratio(f"aspects.{self.name}", self.ratio)
        return Aspect(self.name, self.ratio, shape_for_ratio(f"aspects.{self.name}", ratio_w, ratio_h, long_side))


def plan_aspect(name: str, entry: dict, long_side: int = DEFAULT_LONG_SIDE) -> Aspect:
    """Turn one `aspects.<name>` entry of params.yaml, already checked by the params schema, into an
    Aspect at a tier's `long_side`, or raise AspectError."""
    where = f"aspects.{name}"
    has_ratio = "ratio" in entry
    has_size = "height" in entry or "width" in entry
    if has_ratio == has_size:
        raise AspectError(f"{where}: give either ratio (\"W:H\") or both height and width, not {sorted(entry)}")
    if has_ratio:
        ratio_w, ratio_h = parse_ratio(where, entry["ratio"])
        shape = shape_for_ratio(where, ratio_w, ratio_h, long_side)
        return Aspect(name, str(entry["ratio"]), shape)
    if "height" not in entry or "width" not in entry:
        raise AspectError(f"{where}: explicit sizes need both height and width")
    shape = Shape(entry["height"], entry["width"])
    g = math.gcd(shape.width, shape.height)
    return Aspect(name, f"{shape.width // g}:{shape.height // g}", shape)


def parse_ratio(where: str, ratio: object) -> tuple[Decimal, Decimal]:
    """'W:H' -> (W, H) as positive finite decimals."""
    parts = ratio.split(":") if isinstance(ratio, str) else []
    try:
        w, h = (Decimal(p.strip()) for p in parts) if len(parts) == 2 else (None, None)
    except InvalidOperation:
        w = h = None
    if w is None or not (w.is_finite() and h.is_finite()) or w <= 0 or h <= 0:
        raise AspectError(
            f"{where}.ratio: {ratio!r} is not a ratio of two positive numbers written \"W:H\" "
            f"(e.g. \"9:16\" for portrait, \"9:19.5\")"
        )
    return w, h


def shape_for_ratio(where: str, ratio_w: Decimal, ratio_h: Decimal, long_side: int) -> Shape:
    """Long side = long_side; short side = nearest multiple of PATCH to the exact value."""
    short_exact = Decimal(long_side) * min(ratio_w, ratio_h) / max(ratio_w, ratio_h)
    short = int((short_exact / PATCH + Decimal("0.5")).to_integral_value(rounding="ROUND_FLOOR")) * PATCH
    if short < MIN_SIDE:
        raise AspectError(
            f"{where}: ratio {ratio_w}:{ratio_h} at long side {long_side} gives a short side of "
            f"{short} px, below the minimum {MIN_SIDE} ({PATCH}*4)"
        )
    return Shape(long_side, short) if ratio_h >= ratio_w else Shape(short, long_side)


def closest_aspect(aspects: list[Aspect], width: int, height: int) -> tuple[Aspect, str]:
    """The catalogued aspect whose W/H is closest to a camera's, compared in log space.

    Log space makes 9:16 and 16:9 equally far from 1:1, so the winner is the model that crops
    the least of the camera frame. Orientation counts only through the ratio: a nearly square
    landscape camera (1080x1024) gets a portrait 3:4 model over a 16:9 one, since it crops
    less. Ties go to the larger model (more pixels), then to the name, so the choice is
    stable. Returns the aspect and a sentence explaining the choice.
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"camera size must be positive, got {width}x{height}")
    if not aspects:
        raise ValueError("the catalog has no aspects to choose from")
    target = math.log(width / height)

    def key(a: Aspect):
        return (round(abs(math.log(a.width / a.height) - target), 9), -a.width * a.height, a.name)

    best = min(aspects, key=key)
    ratio_error = abs(math.exp(abs(math.log(best.width / best.height) - target)) - 1)
    return best, (
        f"camera {width}x{height} (WxH, W/H {width / height:.4f}) -> {best.name} "
        f"(HxW {best.shape}, W/H {best.width / best.height:.4f}, {ratio_error:.2%} off)"
    )


def within_tier(aspects: list[Aspect], long_side: int | None = None, max_gmac: float | None = None,
                gmac: dict[str, float] | None = None) -> tuple[list[Aspect], str | None]:
    """The files an app may choose from before the camera decides: those of one long side (`long_side`), or
    the largest file of each ratio among those whose cost (`gmac`: GMAC per inference by aspect name) is within a
    budget (`max_gmac`). When neither is given, the largest file of each ratio. So a 16:9 file at 518 never wins
    over the one at 896 that the budget allows by a pixel ratio its rounding made a hair closer to the camera's,
    and files of different ratios all stay, whatever their long sides. Returns them and a sentence saying what
    the tier kept (None when it kept every file), or raises AspectError naming what the catalog offers."""
    if long_side is not None:
        kept = [a for a in aspects if a.long_side == long_side]
        if not kept:
            raise AspectError(f"no file of long side {long_side}: the catalog's long sides are "
                              f"{', '.join(map(str, sorted({a.long_side for a in aspects})))}")
        return kept, f"long side {long_side}: {len(kept)} of {len(aspects)} files"
    if max_gmac is not None:
        if gmac is None or any(a.name not in gmac for a in aspects):
            raise AspectError("this catalog records no GMAC per file (made before the farm counted them): choose "
                              "a tier by long side instead")
        fit = [a for a in aspects if gmac[a.name] <= max_gmac]
        if not fit:
            cheapest = min(aspects, key=lambda a: gmac[a.name])
            raise AspectError(f"no file within {max_gmac:g} GMAC: the cheapest, {cheapest.name} "
                              f"(HxW {cheapest.shape}), costs {gmac[cheapest.name]:g} GMAC per inference")
        kept = _largest_of_each_ratio(fit)
        return kept, (f"budget {max_gmac:g} GMAC: {len(fit)} of {len(aspects)} files fit (long sides "
                      f"{', '.join(map(str, sorted({a.long_side for a in fit})))})"
                      + (f", the largest of each ratio among them: {len(kept)}" if len(kept) < len(fit) else ""))
    kept = _largest_of_each_ratio(aspects)
    if len(kept) == len(aspects):
        return aspects, None
    return kept, (f"the largest file of each ratio (--long-side or --max-gmac for a smaller one): "
                  f"{len(kept)} of {len(aspects)} files")


def _largest_of_each_ratio(aspects: list[Aspect]) -> list[Aspect]:
    """Of the files of one nominal ratio (the catalog's W:H), the one with the most pixels; in catalog order."""
    largest: dict[Decimal, Aspect] = {}
    for a in aspects:
        w, h = parse_ratio(a.name, a.ratio)
        best = largest.setdefault(w / h, a)
        if a.height * a.width > best.height * best.width:
            largest[w / h] = a
    return [a for a in aspects if a in largest.values()]
