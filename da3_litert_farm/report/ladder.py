"""The report's ladder: each file's fidelity against its cost, as an inline SVG scatter plot.

An app team picks a file by what it costs on their phones and how close it stays to the official model; the
table lists both, the plot shows where each file sits among the others. Plain SVG, no script: the page opens
from the file system.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

WIDTH, HEIGHT = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 50  # margins, in pixels, for the axes' ticks and titles
TICKS = 4


@dataclass(frozen=True)
class Point:
    label: str
    cost: float  # x: what one inference costs (e.g. GMAC)
    error: float  # y: how far from the official model (e.g. 1 - Pearson on the GPU)
    note: str = ""  # shown on hover


def _axis_top(values: list[float]) -> float:
    """A round upper end for an axis from 0 that holds every value: 1, 2 or 5 times a power of ten."""
    top = max(values) if values and max(values) > 0 else 1.0
    power = 10 ** math.floor(math.log10(top))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= top)


def _fmt(value: float) -> str:
    if 0 < abs(value) < 0.01:  # 2.5e-4, not 0.00025
        mantissa, exponent = f"{value:.1e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return f"{value:g}"


def ladder_svg(points: list[Point], x_title: str, y_title: str) -> str:
    """An SVG scatter of `points` on linear axes from 0, each point labelled."""
    x_top, y_top = _axis_top([p.cost for p in points]), _axis_top([p.error for p in points])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(value: float) -> float:
        return LEFT + plot_w * value / x_top

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / y_top)

    esc = html.escape
    parts = [f'<svg id="ladder" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(y_title)} against {esc(x_title)}">',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    for i in range(TICKS + 1):
        xv, yv = x_top * i / TICKS, y_top * i / TICKS
        parts.append(f'<text x="{x(xv):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle" font-size="11">'
                     f'{_fmt(xv)}</text>')
        parts.append(f'<text x="{LEFT - 6}" y="{y(yv) + 4:.1f}" text-anchor="end" font-size="11">{_fmt(yv)}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle" font-size="12">'
                 f'{esc(x_title)}</text>')
    parts.append(f'<text x="14" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" font-size="12" '
                 f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">{esc(y_title)}</text>')
    labels: list[tuple[float, float, float]] = []  # x, baseline y and width of each label placed
    dots = [(x(p.cost), y(p.error)) for p in points]

    def clashes(lx: float, ly: float, width: float) -> bool:
        """Whether a label there would cover another label or a point (11-pixel text: 13 pixels a line)."""
        return (any(lx < ox + ow and ox < lx + width and abs(ly - oy) < 13 for ox, oy, ow in labels)
                or any(lx - 5 < dx < lx + width + 5 and ly - 16 < dy < ly + 5 for dx, dy in dots))

    for p in points:
        width, label_x, label_y = 6.5 * len(p.label), x(p.cost) + 8, y(p.error) - 6
        # Points close together (two tiers of one cost) would print their labels over each other: step down.
        for _ in range(4):
            if not clashes(label_x, label_y, width):
                break
            label_y += 13
        labels.append((label_x, label_y, width))
        parts.append(f'<g class="point" data-label="{esc(p.label)}"><title>{esc(p.label)}: {_fmt(p.cost)}, '
                     f'{_fmt(p.error)}{esc(" " + p.note if p.note else "")}</title>'
                     f'<circle cx="{x(p.cost):.1f}" cy="{y(p.error):.1f}" r="5" fill="#3367d6"/>'
                     f'<text x="{label_x:.1f}" y="{label_y:.1f}" font-size="11">{esc(p.label)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)
