"""The real pipeline: `dvc repro` in a temporary copy of the repository.

A stress checkpoint is written in the Hub layout under checkpoints/ (`source: local`), and
the farm builds one model at one tier over two small aspects. The tests below then edit
params.yaml the way a user would and check what DVC reruns. They share one farm and run in file
order; each leaves the farm as the next one expects (two aspects a and b at one tier, plus c once
`test_adding_an_aspect_builds_only_that_aspect` has run). The tier test runs before c is added: two cells, not three.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import jsonschema
import numpy as np
import pytest
import yaml
from PIL import Image

from da3_litert_farm.core import paths
from da3_litert_farm.ops.catalog import validate_catalog
from da3_litert_farm.checks.fidelity import TFLiteModel
from da3_litert_farm.core.fileio import sha256_file
from da3_litert_farm.config.params import load_params
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.photo_input import load_photo_tensor
from da3_litert_farm.model.weights import load_official_from_dir
from da3_litert_farm.report.report_check import check_report
from da3_litert_farm.report.report_images import as_plane, colorize, depth_scale
from tests.farm_repo import BUNDLE_STAGE, MODEL, REPO, SMALL_TIER, Farm, cell, chain, restored_stages

@pytest.fixture(scope="module")
def farm(first_build) -> Farm:
    return first_build.farm


def test_first_build_catalogs_every_aspect(farm):
    catalog = farm.catalog()
    validate_catalog(catalog)
    assert [(m["aspect"], m["height"], m["width"]) for m in catalog["models"]] == [("a", 126, 224), ("b", 224, 126)]
    assert [(m["cell"], m["model"], m["tier"]) for m in catalog["models"]] == [(cell("a"), MODEL, SMALL_TIER),
                                                                              (cell("b"), MODEL, SMALL_TIER)]
    checkpoint = catalog["sources"][MODEL]["checkpoint"]
    assert checkpoint["source"] == "local"
    assert checkpoint["weights_sha256"] == sha256_file(farm.root / "checkpoints/stress/model.safetensors")
    validation = farm.params["validation"]  # the gates this farm's params.yaml sets
    official = load_official_from_dir(farm.root / "checkpoints/stress")
    for m in catalog["models"]:
        assert sha256_file(farm.root / m["file"]) == m["sha256"]
        assert m["gpu_lint"]["gpu_clean"] and m["gpu_lint"]["max_rank"] <= 4
        assert m["fidelity"]["pearson_min"] >= 0.99999
        gpu = m["gpu"]
        assert gpu["checked"] and gpu["fully_accelerated"] and gpu["precision"] == "fp16" and gpu["adapter"]
        gate_pearson, gate_mean_rel = validation["gpu_min_pearson"], validation["gpu_max_mean_rel"]
        assert (gpu["gate_min_pearson"], gpu["gate_max_mean_rel"]) == (gate_pearson, gate_mean_rel)
        assert gpu["pearson_min"] >= gate_pearson and gpu["mean_rel_max"] <= gate_mean_rel
        assert gpu["pearson_min"] < m["fidelity"]["pearson_min"]  # FP16 arithmetic costs more than the CPU's
        record = json.loads((farm.root / paths.gpu_metrics(m["cell"])).read_text())
        assert record["sha256"] == m["sha256"] and record["passed"] and set(record["photos"]) == set(gpu["photos"])
        assert list(gpu["photos"]) == validation["gpu_photos"]  # the GPU runs these, the CPU check all photos
        with np.load(farm.root / paths.gpu_depth(m["cell"])) as maps:
            assert set(maps.files) == set(gpu["photos"])
            assert all(maps[p].shape == (1, 1, m["height"], m["width"]) for p in maps.files)
        # What the file cost on this machine: one CPU inference, a GPU inference (a photo's share of the GPU
        # check, which also loaded the file), and an export that held at least the FP32 flatbuffer it wrote.
        cost = m["cost"]
        assert cost["cpu_ms"] > 0 and cost["cpu_threads"] == 2
        assert 0 < cost["gpu_seconds"] < gpu["seconds"]
        fp32_mib = (farm.root / paths.fp32_model(m["cell"])).stat().st_size / 2**20
        assert cost["export_peak_rss_mib"] > fp32_mib and cost["export_seconds"] > 0
        metrics = json.loads((farm.root / paths.metrics(m["cell"])).read_text())
        assert all(g["passed"] for g in metrics["gates"].values())
        assert list(metrics["fidelity"]["photos"]) == validation["photos"]
        shipped, pearson = TFLiteModel(farm.root / m["file"]), {}
        with np.load(farm.root / paths.depth_maps(m["cell"])) as maps:
            for photo, figures in metrics["fidelity"]["photos"].items():
                official_map, cpu_map = maps[f"{photo}.official"], maps[f"{photo}.cpu"]
                # The stored maps are the models' output: run both again here, from the farm's own files.
                image = load_photo_tensor(photo, m["height"], m["width"])
                np.testing.assert_allclose(official_map, official_depth(official, image).numpy(), rtol=1e-5)
                np.testing.assert_allclose(cpu_map, shipped(image.numpy()), rtol=1e-5)
                pearson[photo] = np.corrcoef(cpu_map.astype(np.float64).ravel(),
                                             official_map.astype(np.float64).ravel())[0, 1]  # numpy's formula
                assert figures["pearson"] == pytest.approx(pearson[photo], abs=1e-10), photo
        gates = metrics["gates"]
        assert gates["min_pearson"]["limit"] == validation["min_pearson"]
        assert gates["max_mean_rel"]["limit"] == validation["max_mean_rel"]
        assert gates["min_pearson"]["value"] == pytest.approx(min(pearson.values()), abs=1e-10)  # measured
        box = metrics["letterbox"]  # the square model's cost, on the official model
        assert box["square"] == [max(m["height"], m["width"])] * 2 and 0 < box["pearson_min"] <= 1
        assert box["mac_ratio_square_to_native"] > 1


def test_the_bundle_holds_every_catalogued_aspect(farm):
    """One file, a signature per aspect; on the GPU accelerator each signature gives what its own file gave."""
    catalog = farm.catalog()
    (bundle,), models = catalog["bundles"], {m["aspect"]: m for m in catalog["models"]}
    assert (bundle["bundle"], bundle["model"], bundle["tier"]) == (f"{MODEL}-{SMALL_TIER}", MODEL, SMALL_TIER)
    path = farm.root / bundle["file"]
    assert sha256_file(path) == bundle["sha256"] and path.stat().st_size == bundle["bytes"]
    assert [s["signature"] for s in bundle["signatures"]] == ["a", "b"]
    assert bundle["singles_bytes"] == sum((farm.root / m["file"]).stat().st_size for m in models.values())
    assert bundle["bytes"] < 0.6 * bundle["singles_bytes"]  # two files' weights stored once
    record = json.loads((farm.root / paths.bundle_record(bundle["bundle"])).read_text())
    assert [s["sha256"] for s in record["signatures"]] == [models[a]["sha256"] for a in ("a", "b")]
    assert record["gates"]["sharing"]["value"] <= record["gates"]["sharing"]["limit"]
    gpu = bundle["gpu"]
    assert gpu["checked"] and gpu["fully_accelerated"] and gpu["bitwise_equal"] and gpu["signature"] == "a"
    for acc in ("cpu", "gpu"):
        assert bundle["load"][acc]["bundle"]["seconds"] > 0 and bundle["load"][acc]["single"]["cell"] == cell("a")
    # The stage ran signature a; here b, against what gpu@b recorded for b's own file.
    from da3_litert_farm.gpu.gpu_runtime import GpuModel
    from da3_litert_farm.model.photo_input import cover_and_center_crop, load_photo, normalize

    photo = gpu["photo"]
    image = normalize(cover_and_center_crop(load_photo(photo), 224, 126))
    with np.load(farm.root / paths.gpu_depth(cell("b"))) as maps:
        recorded = maps[photo]
    model = GpuModel(path, signature="b")
    assert model.fully_accelerated and model.input_shape == (1, 3, 224, 126)
    assert np.array_equal(model(image), recorded)
    page = (farm.root / "artifacts/report/index.html").read_text()
    assert f"{bundle['bytes'] / 1e6:.1f} MB</b> instead of {bundle['singles_bytes'] / 1e6:.1f} MB" in page


def test_report_shows_what_the_stages_measured(farm):
    catalog, report = farm.catalog(), farm.root / "artifacts" / "report"
    page = (report / "index.html").read_text()
    summary = {cell(a): json.loads((farm.root / paths.summary(cell(a))).read_text()) for a in ("a", "b")}
    assert sorted(p.name for p in (farm.root / "artifacts/summary").iterdir()) == [f"{cell('a')}.json",
                                                                                  f"{cell('b')}.json"]
    expected = {}  # figures from the per-aspect records and the file itself, not from the catalog
    for m in catalog["models"]:
        aspect, figures, folder = m["cell"], summary[m["cell"]], farm.root / paths.cell_dir(m["cell"])
        metrics = json.loads((folder / "metrics.json").read_text())
        gpu_record = json.loads((folder / "gpu.json").read_text())
        expected[aspect] = {
            "megabytes": pytest.approx((farm.root / m["file"]).stat().st_size / 1e6, abs=5e-4),  # 3 decimals
            "cpu_1_minus_pearson_ppm": pytest.approx(
                (1 - min(p["pearson"] for p in metrics["fidelity"]["photos"].values())) * 1e6, rel=1e-9),
            "gpu_1_minus_pearson_ppm": pytest.approx(
                (1 - min(p["pearson"] for p in gpu_record["photos"].values())) * 1e6, rel=1e-9),
            "letterbox_mac_ratio": pytest.approx(
                metrics["letterbox"]["macs_square"] / metrics["letterbox"]["macs_native"], rel=1e-9),
        }
        assert {key: figures[key] for key in expected[aspect]} == expected[aspect]
        assert f'<tr data-cell="{aspect}"><td>{aspect}</td><td>{m["height"]} x {m["width"]}</td>' in page
        assert m["sha256"][:12] in page
        with np.load(folder / "gpu_depth.npz") as gpu_maps:
            for photo in m["gpu"]["photos"]:
                for kind in ("input", "official", "shipped", "error"):
                    assert f'src="images/{aspect}/{photo}-{kind}.png"' in page
                    with Image.open(report / "images" / aspect / f"{photo}-{kind}.png") as picture:
                        assert picture.size == (m["width"], m["height"])
                # The shipped picture is the GPU's depth map in the official map's colour range.
                with np.load(folder / "depth.npz") as maps:
                    scale = depth_scale(as_plane(maps[f"{photo}.official"]))
                shown = np.asarray(Image.open(report / "images" / aspect / f"{photo}-shipped.png"))
                assert np.array_equal(shown, colorize(as_plane(gpu_maps[photo]), scale))
    on_gpu = sum(len(m["gpu"]["photos"]) for m in catalog["models"])  # validation.gpu_photos per aspect
    assert page.count("shipped .tflite on the GPU accelerator, FP16") == on_gpu
    assert page.count("shipped .tflite on the CPU (XNNPACK): not in validation.gpu_photos") == 2 * 3 - on_gpu
    assert "STRESS WEIGHTS" not in page  # local weights: no banner
    plots = json.loads((farm.root / "artifacts/plots.json").read_text())
    assert [row["cell"] for row in plots] == [cell("a"), cell("b")]  # one row per cell, in catalog order
    for row in plots:
        assert set(row) == {"cell", *summary[row["cell"]]}
        assert {key: row[key] for key in expected[row["cell"]]} == expected[row["cell"]]


def test_dvc_metrics_and_plots_show_the_summary(farm):
    def dvc(*args):
        proc = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=farm.root, env=farm.env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    shown = json.loads(dvc("metrics", "show", "--json"))
    (files,) = [rev["data"] for rev in shown.values()]
    summaries = [paths.summary(cell(a)).as_posix() for a in ("a", "b")]
    assert sorted(files) == summaries
    table = dvc("metrics", "show").splitlines()  # a header, then one row per cell
    assert [line.split()[0] for line in table[1:]] == summaries
    plots = json.loads(dvc("plots", "show", "--json"))["data"]
    definitions = yaml.safe_load((farm.root / "dvc.yaml").read_text())["plots"]
    assert set(plots) == {title for definition in definitions for title in definition}
    for definition in definitions:
        (title,) = definition
        (plot,) = plots[title]
        rows = plot["content"]["data"]["values"]
        assert sorted(r["cell"] for r in rows) == [cell("a"), cell("b")], title
        assert all(r[definition[title]["x"]] > 0 for r in rows)


def test_report_opens_in_a_headless_browser(farm, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.report.report_check"], cwd=farm.root, env=farm.env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 2 aspects x 3 photos x (4 pictures + 3 scale bars)
    assert "no console error; 42 images decoded; 2 cells listed" in proc.stdout
    with Image.open(farm.root / "artifacts/report/screenshot.png") as shot:
        assert shot.format == "PNG" and shot.width == 1400 and shot.height > 2000
    # The check can fail: a copy of the page with one image gone.
    broken = tmp_path / "report"
    shutil.copytree(farm.root / "artifacts/report", broken)
    (broken / f"images/{cell('b')}/coffee-error.png").unlink()
    problems, _ = check_report(broken / "index.html", farm.catalog(), screenshot=None)
    assert any("ERR_FILE_NOT_FOUND" in p for p in problems), problems
    assert f"image images/{cell('b')}/coffee-error.png did not decode (naturalWidth 0)" in problems
    problems, _ = check_report(broken / "index.html", {**farm.catalog(), "warning": "STRESS WEIGHTS"}, None)
    assert any(p.startswith("stress warning on the page: None") for p in problems), problems


def test_schema_rejects_a_broken_catalog(farm):
    broken = farm.catalog()
    broken["models"][0]["sha256"] = "xyz"
    with pytest.raises(jsonschema.ValidationError, match=r"'xyz' does not match '\^\[0-9a-f\]\{64\}\$'(?s:.*)"
                                                         r"On instance\['models'\]\[0\]\['sha256'\]"):
        validate_catalog(broken)
    broken = farm.catalog()
    broken["models"][0]["gpu_lint"]["max_rank"] = 5
    with pytest.raises(jsonschema.ValidationError, match=r"5 is greater than the maximum of 4(?s:.*)"
                                                         r"On instance\['models'\]\[0\]\['gpu_lint'\]\['max_rank'\]"):
        validate_catalog(broken)


def test_adding_a_tier_builds_only_its_cells_and_bundle_and_removing_it_prunes_them(farm):
    before = {cell(a): farm.file_hashes(cell(a)) for a in ("a", "b")}
    doc = farm.params
    doc["tiers"] = [SMALL_TIER, 112]
    farm.set_params(doc)
    ran, output = farm.repro()
    low = f"bundle@{MODEL}-112"
    assert ran == {"params", low, "catalog", "report"} | chain("a", "b", tier=112), output
    catalog = farm.catalog()
    assert {(m["cell"], m["height"], m["width"]) for m in catalog["models"] if m["tier"] == 112} == {
        (cell("a", 112), 70, 112), (cell("b", 112), 112, 70)}  # 63 rounds up to 70
    assert [m["tier"] for m in catalog["models"]] == [SMALL_TIER] * 2 + [112] * 2  # tiers in params.yaml's order
    assert [(b["bundle"], [s["signature"] for s in b["signatures"]]) for b in catalog["bundles"]] == [
        (f"{MODEL}-{SMALL_TIER}", ["a", "b"]), (f"{MODEL}-112", ["a", "b"])]  # signatures in name order
    assert {c: farm.file_hashes(c) for c in before} == before
    ran, output = farm.repro()
    assert ran == set(), output
    doc["tiers"] = [SMALL_TIER]
    farm.set_params(doc)
    ran, output = farm.repro()
    assert ran == {"params", "catalog", "report"}, output
    assert f"removed {(paths.MODELS / MODEL / '112').as_posix()} (tier no longer in params.yaml)" in output
    assert not (farm.root / paths.bundle_dir(f"{MODEL}-112")).exists()
    lock = yaml.safe_load((farm.root / "dvc.lock").read_text())["stages"]
    assert not [name for name in lock if f"@{MODEL}-112" in name]
    assert [b["bundle"] for b in farm.catalog()["bundles"]] == [f"{MODEL}-{SMALL_TIER}"]


def test_adding_an_aspect_builds_only_that_aspect(farm):
    farm.git("add", "-A")  # summary/ and plots.json are in git: `dvc metrics|plots diff` compare commits
    farm.git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "aspects a and b")
    before = {a: farm.file_hashes(cell(a)) for a in ("a", "b")}
    doc = farm.params
    doc["aspects"]["c"] = {"ratio": "2:1"}  # 112x224
    farm.set_params(doc)
    ran, _ = farm.repro()
    assert ran == {"params", BUNDLE_STAGE, "catalog", "report"} | chain("c")
    assert [m["aspect"] for m in farm.catalog()["models"]] == ["a", "b", "c"]
    assert {a: farm.file_hashes(cell(a)) for a in ("a", "b")} == before
    diff = json.loads(subprocess.run([sys.executable, "-m", "dvc", "metrics", "diff", "HEAD", "--json"], cwd=farm.root,
                                     env=farm.env, capture_output=True, text=True, check=True).stdout)
    assert list(diff) == [paths.summary(cell("c")).as_posix()]  # a and b unchanged
    assert diff[paths.summary(cell("c")).as_posix()]["megabytes"]["old"] is None
    plots = json.loads(subprocess.run([sys.executable, "-m", "dvc", "plots", "diff", "HEAD", "--json"], cwd=farm.root,
                                      env=farm.env, capture_output=True, text=True, check=True).stdout)["data"]
    (plot,) = plots["Size of the shipped file in MB"]
    drawn = sorted((row["rev"], row["cell"]) for row in plot["content"]["data"]["values"])
    assert drawn == [("HEAD", cell("a")), ("HEAD", cell("b")), ("workspace", cell("a")), ("workspace", cell("b")),
                     ("workspace", cell("c"))]
    ran, output = farm.repro()
    assert ran == set(), output
    assert "up to date" in output


def test_editing_validation_reruns_only_validation_and_catalog(farm):
    doc = farm.params
    doc["validation"]["photos"] = ["astronaut", "coffee", "rocket"]
    farm.set_params(doc)
    ran, _ = farm.repro()
    assert ran == {"params", BUNDLE_STAGE, "catalog", "report"} | {f"{stage}@{cell(a)}" for stage in ("validate", "npu",
                                                                                                      "gpu")
                                                                   for a in ("a", "b", "c")}
    assert set(farm.catalog()["models"][0]["fidelity"]["photos"]) == {"astronaut", "coffee", "rocket"}
    # The device checks rerun (their official maps changed: npu@CELL builds nothing here), on validation.gpu_photos
    # only.
    assert list(farm.catalog()["models"][0]["gpu"]["photos"]) == doc["validation"]["gpu_photos"] == ["coffee"]


def last_good_comes_back(farm, good_params: dict, before: dict, failed: str) -> None:
    """The promise a failed stage keeps: undo the edit, `dvc repro` restores the last good build
    from the run-cache without running anything, byte for byte, and it is what the catalog lists."""
    farm.set_params(good_params)
    ran, output = farm.repro()
    assert ran == {"params"}, output  # the check; everything else from the run-cache
    assert failed in restored_stages(output)
    assert {c: farm.file_hashes(c) for c in before} == before
    for m in farm.catalog()["models"]:
        assert sha256_file(farm.root / m["file"]) == m["sha256"]


def test_a_failed_gate_is_never_catalogued(farm):
    catalog_before = (farm.root / "artifacts" / "catalog.json").read_bytes()
    before = {cell(a): farm.file_hashes(cell(a)) for a in ("a", "b", "c")}
    good = farm.params
    doc = farm.params
    doc["validation"]["min_pearson"] = 1.0  # no FP16 model reaches exactly 1
    farm.set_params(doc)
    ran, output = farm.repro(expect_ok=False)
    assert "catalog" not in ran
    assert re.search(r"validate [\w-]+: FAILED pearson 0\.\d+ on photo '\w+' < gate validation.min_pearson 1\.0", output)
    assert (farm.root / "artifacts" / "catalog.json").read_bytes() == catalog_before
    failed = re.search(r"validate ([\w-]+): FAILED", output).group(1)
    last_good_comes_back(farm, good, before, f"validate@{failed}")


def test_a_failed_gpu_gate_is_never_catalogued(farm):
    catalog_before = (farm.root / "artifacts" / "catalog.json").read_bytes()
    before = {cell(a): farm.file_hashes(cell(a)) for a in ("a", "b", "c")}
    good = farm.params
    doc = farm.params
    doc["validation"]["gpu_min_pearson"] = 1.0  # FP16 arithmetic never reaches exactly 1
    farm.set_params(doc)
    ran, output = farm.repro(expect_ok=False)
    assert "catalog" not in ran and not ran & {f"validate@{cell(a)}" for a in ("a", "b", "c")}
    assert re.search(r"gpu [\w-]+: FAILED pearson 0\.\d+ on photo '\w+' < gate validation.gpu_min_pearson 1\.0", output)
    assert (farm.root / "artifacts" / "catalog.json").read_bytes() == catalog_before
    assert good["validation"]["gpu_min_pearson"] == load_params(REPO / "params.yaml").validation.gpu_min_pearson
    failed = re.search(r"gpu ([\w-]+): FAILED", output).group(1)
    last_good_comes_back(farm, good, before, f"gpu@{failed}")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["aspects"]["a"].update(height=130), "aspects.a.height: 130 is not a multiple of 14"),
        (lambda d: d["aspects"]["b"].update(ratio="9:0"), "aspects.b.ratio: '9:0' is not a ratio"),
        (lambda d: d["aspects"].update(d2={"height": 126, "width": 224}), "aspects.d2 and aspects.a both give 126x224"),
        (lambda d: d["models"][MODEL].update(path="checkpoints/missing"),
         f"models.{MODEL}.path: 'checkpoints/missing' lacks"),
    ],
)
def test_bad_params_fail_fast_and_touch_nothing(farm, edit, message):
    good = farm.params
    before = {cell(a): farm.file_hashes(cell(a)) for a in ("a", "b", "c")}
    catalog_before = (farm.root / "artifacts" / "catalog.json").read_bytes()
    doc = farm.params
    edit(doc)
    farm.set_params(doc)
    check = subprocess.run([sys.executable, "-m", "stages.params"], cwd=farm.root, env=farm.env,
                           capture_output=True, text=True)
    assert check.returncode != 0 and message in check.stderr
    ran, output = farm.repro(expect_ok=False)
    assert ran == {"params"} and message in output  # the check stops DVC before it removes any output
    assert {c: farm.file_hashes(c) for c in before} == before
    assert (farm.root / "artifacts" / "catalog.json").read_bytes() == catalog_before
    farm.set_params(good)


def test_removed_aspect_vanishes_from_catalog_and_disk_and_comes_back_from_the_run_cache(farm):
    b_files = farm.file_hashes(cell("b"))
    doc = farm.params
    b = doc["aspects"].pop("b")
    farm.set_params(doc)
    ran, output = farm.repro()
    assert ran == {"params", BUNDLE_STAGE, "catalog", "report"}, output
    assert [m["aspect"] for m in farm.catalog()["models"]] == ["a", "c"]
    assert [s["signature"] for s in farm.catalog()["bundles"][0]["signatures"]] == ["a", "c"]
    assert sorted(p.name for p in (farm.root / "artifacts/summary").iterdir()) == [f"{cell('a')}.json",
                                                                                  f"{cell('c')}.json"]
    assert not (farm.root / paths.cell_dir(cell("b"))).exists()
    assert f"removed {paths.cell_dir(cell('b')).as_posix()}" in output
    lock = yaml.safe_load((farm.root / "dvc.lock").read_text())["stages"]
    assert not [name for name in lock if name.endswith(f"@{cell('b')}")]
    assert {f"patch@{cell('a')}", f"validate@{cell('c')}", "catalog"} <= set(lock)
    ran, output = farm.repro()
    assert ran == set(), output
    doc["aspects"]["b"] = b  # back: restored from DVC's run-cache, nothing converted
    farm.set_params(doc)
    ran, output = farm.repro()
    assert ran == {"params", "catalog", "report"}, output
    assert restored_stages(output) == {BUNDLE_STAGE} | chain("b")  # the bundle of a, b, c was built before
    assert [s["signature"] for s in farm.catalog()["bundles"][0]["signatures"]] == ["a", "b", "c"]  # name order
    assert farm.file_hashes(cell("b")) == b_files
    assert sorted(m["aspect"] for m in farm.catalog()["models"]) == ["a", "b", "c"]
