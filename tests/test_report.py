"""The report's pictures and its failure path (the page itself is tested on a real farm in test_farm_e2e)."""


import numpy as np
import pytest
from matplotlib import colormaps

import xml.etree.ElementTree as ET

from da3_litert_farm.checks.agreement import compare, relative_error
from da3_litert_farm.report.ladder import Point, ladder_svg
from da3_litert_farm.report.report_images import Scale, colorize, depth_scale, error_scale, scale_bar
from tests.farm_repo import run_stage


def test_the_error_map_is_the_map_behind_the_mean_relative_error():
    rng = np.random.default_rng(0)
    official = rng.uniform(0.5, 20.0, (1, 1, 14, 28))
    planted = rng.uniform(-2e-3, 2e-3, official.shape)  # each pixel's relative error, known beforehand
    planted[0, 0, 5, 9] = -5e-3  # the worst pixel
    shipped = official * (1 + planted)
    error = relative_error(shipped, official)
    np.testing.assert_allclose(error, np.abs(planted), rtol=0, atol=1e-12)
    assert compare(shipped, official)["mean_rel_error"] == pytest.approx(np.abs(planted).mean(), rel=1e-9)
    scale = error_scale(error)
    assert scale.low == 0.0 and scale.high == pytest.approx(5e-3, rel=1e-9)  # the worst pixel is the brightest


def test_colours_run_from_low_to_high_and_clip_outside():
    scale = Scale("inferno", 2.0, 4.0)
    rgb = colorize(np.array([[1.0, 2.0, 3.0, 4.0, 9.0]]), scale)
    ends = colormaps["inferno"]([0.0, 1.0], bytes=True)[:, :3]
    assert rgb.dtype == np.uint8 and rgb.shape == (1, 5, 3)
    assert (rgb[0, 0] == ends[0]).all() and (rgb[0, 1] == ends[0]).all()  # below the range: the low colour
    assert (rgb[0, 3] == ends[1]).all() and (rgb[0, 4] == ends[1]).all()  # above: the high colour
    bar = scale_bar("inferno")
    assert (bar[:, 0] == ends[0]).all() and (bar[:, -1] == ends[1]).all()


def test_depth_colours_ignore_the_extreme_percent():
    depth = np.concatenate([np.linspace(1.0, 2.0, 995), np.full(5, 1000.0)])
    scale = depth_scale(depth)
    assert 1.0 < scale.low < 1.05 and scale.high < 3.0  # one far outlier does not wash out the map


def test_without_a_catalog_the_report_says_what_to_run_and_writes_nothing(tmp_path):
    proc = run_stage("report", cwd=tmp_path)
    assert proc.returncode == 1
    assert "report: artifacts/catalog.json is missing: run `dvc repro`" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_ladder_puts_each_file_where_its_cost_and_error_are():
    points = [Point("9x16", 117.5, 5.4e-4, "(896 x 504)"), Point("9x16-518", 39.2, 6.1e-4),
              Point("3x4", 156.7, 6.4e-4), Point("3x4-518", 52.0, 3.0e-4)]
    svg = ET.fromstring(ladder_svg(points, "GMAC per inference", "1 - r on the GPU accelerator, FP16"))
    ns = {"s": "http://www.w3.org/2000/svg"}
    plot = svg.find("s:rect", ns)
    left, top = float(plot.get("x")), float(plot.get("y"))
    width, height = float(plot.get("width")), float(plot.get("height"))
    ticks = [t.text for t in svg.findall("s:text", ns)]
    assert "200" in ticks and "1e-3" in ticks and "2.5e-4" in ticks  # the axes end at round values over the largest
    where = {g.get("data-label"): g.find("s:circle", ns) for g in svg.findall("s:g", ns)}
    assert set(where) == {p.label for p in points}
    for p in points:  # x from 0 to 200 GMAC, y from 0 (bottom) to 1e-3 (top), to the 0.1 pixel written
        cx, cy = float(where[p.label].get("cx")), float(where[p.label].get("cy"))
        assert cx == pytest.approx(left + width * p.cost / 200, abs=0.06)
        assert cy == pytest.approx(top + height * (1 - p.error / 1e-3), abs=0.06)
    assert svg.find("s:g/s:title", ns).text == "9x16: 117.5, 5.4e-4 (896 x 504)"
