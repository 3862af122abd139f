"""The light client's own logic, on catalogs written here: version order, orientation, `show`, sidecars.

Publishing and pulling through real remotes is tested in tests/test_publish_pull.py.
"""

from __future__ import annotations

import json
import random

import pytest

from da3_litert_farm.client.cli import (catalog_aspects, choose, main, orientation_note, public_repo, pull,
                                        PullError, sidecar)
from da3_litert_farm.core.aspects import AspectError
from da3_litert_farm.client.remote import explain, scheme
from da3_litert_farm.client.trust import Release
from da3_litert_farm.client.show import CatalogError, format_summary, summary
from da3_litert_farm.core.models import PRESETS, output_entry
from da3_litert_farm.core.releases import version_key


def test_versions_sort_by_semantic_version_precedence():
    # The order semver.org's item 11 spells out, plus numeric parts past 9.
    ordered = ["0.9.0", "0.10.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
               "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0-rc.2", "1.0.0-rc.10", "1.0.0", "1.0.1", "1.10.0"]
    shuffled = ordered[:]
    random.Random(0).shuffle(shuffled)
    assert sorted(shuffled, key=version_key) == ordered


def model(aspect: str, height: int, width: int, **extra) -> dict:
    return {"aspect": aspect, "ratio": extra.pop("ratio", f"{width}:{height}"), "height": height, "width": width,
            "file": f"artifacts/models/{aspect}/model_fp16.tflite", "sha256": f"{aspect:0<64}"[:64],
            "bytes": 52_000_000, "gpu_lint": {"gmac": 117.52}, "fidelity": {"pearson_min": 0.9999996, "mean_rel_error_max": 8.1e-4,
                                              "photos": {"coffee": 0.9999996, "astronaut": 0.9999998}},
            "gpu": {"checked": True, "pearson_min": 0.99941, "mean_rel_max": 9.8e-3, "photos": {"coffee": 0.99941},
                    "adapter": "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, CPU / Software)", "precision": "fp16"},
            **extra}


def catalog(source: str = "hub") -> dict:
    checkpoint = {"source": source, "repo": "depth-anything/DA3-SMALL", "revision": "main",
                  "resolved_revision": "0123abcd" * 5, "seed": 0, "weights_sha256": "ab" * 32}
    return {"name": "da3-small-litert", "version": "1.0.0", "created": "2026-12-05T00:00:00Z",
            "checkpoint": checkpoint, "tools": {"litert-torch": "0.10.0", "ai-edge-litert": "2.3.0"},
            "models": [model("9x16", 896, 504), model("3x4", 896, 672), model("16x9", 504, 896)]}


@pytest.mark.parametrize("camera, picked, rotated", [
    ((4032, 3024), "16x9", "3x4"),   # a sensor size as Android reports it, landscape: a portrait app must rotate it
    ((3024, 4032), "3x4", "16x9"),
    ((1920, 1080), "16x9", "9x16"),
])
def test_orientation_is_said_where_the_rotated_frame_gets_another_model(camera, picked, rotated):
    entry, reason = choose(catalog(), None, camera)
    assert entry["aspect"] == picked
    note = orientation_note(catalog_aspects(catalog()), camera)
    w, h = camera
    assert note in reason
    assert f"{w}x{h} ({'landscape' if w > h else 'portrait'}) gets {picked}" in note
    assert f"pass {h}x{w}: it gets {rotated}" in note


def test_no_orientation_note_where_both_orientations_get_the_same_model():
    portrait_only = {**catalog(), "models": [model("9x16", 896, 504)]}
    assert orientation_note(catalog_aspects(portrait_only), (1920, 1080)) is None
    assert "\n" not in choose(portrait_only, None, (1920, 1080))[1]


def ladder() -> dict:
    """A catalog of two resolution tiers: the default aspects at long side 896, three of them again at 518
    (aspect entries with their own long_side), with the GMAC the GPU lint counts for such files."""
    gmac = {"9x16": 117.5, "3x4": 157.3, "16x9": 117.5, "9x16-518": 38.9, "3x4-518": 52.0, "16x9-518": 38.9}
    shapes = {"9x16": (896, 504), "3x4": (896, 672), "16x9": (504, 896), "9x16-518": (518, 294),
              "3x4-518": (518, 392), "16x9-518": (294, 518)}
    return {**catalog(), "models": [model(name, h, w, ratio=name.split("-")[0].replace("x", ":"),
                                          gpu_lint={"gmac": gmac[name]}) for name, (h, w) in shapes.items()]}


@pytest.mark.parametrize("camera, budget, picked", [
    ((1080, 1920), 200, "9x16"),      # portrait video; every file fits: the larger of the two 9:16 files
    ((1080, 1920), 50, "9x16-518"),   # a mid-range budget: only the 518 tier fits
    ((3024, 4032), 200, "3x4"),       # portrait stills
    ((3024, 4032), 50, "9x16-518"),   # 3x4-518 costs 52.0: over budget, so the closest ratio that fits
    ((1920, 1080), 200, "16x9"),      # landscape video
    ((1920, 1080), 50, "16x9-518"),
    # Landscape stills, with no 4:3 file: 294x518 is a hair closer to 4:3 than 504x896 (W/H 1.7619 against 1.7778),
    # but within the budget the larger 16:9 file is the better one (found on a two-tier farm's catalog).
    ((4032, 3024), 200, "16x9"),
    ((4032, 3024), 50, "16x9-518"),
])
def test_an_app_chooses_by_camera_within_a_gmac_budget(camera, budget, picked):
    ladder_ = ladder()
    ladder_["models"] = [m for m in ladder_["models"] if camera != (4032, 3024) or not m["aspect"].startswith("3x4")]
    entry, reason = choose(ladder_, None, camera, max_gmac=budget)
    assert entry["aspect"] == picked, reason
    files = len(ladder_["models"])
    fits = files if budget == 200 else 2
    kept = f", the largest of each ratio among them: {files // 2}" if budget == 200 else ""
    assert reason.startswith(f"budget {budget} GMAC: {fits} of {files} files fit (long sides "), reason
    assert f"){kept}; camera" in reason, reason
    assert f"-> {picked} (HxW {entry['height']}x{entry['width']}" in reason
    assert f", {entry['gpu_lint']['gmac']:g} GMAC per inference" in reason


def test_without_a_tier_an_app_gets_the_largest_file_of_each_ratio():
    """294x518 is a hair closer to 4:3 than 504x896 (W/H 1.7619 against 1.7778): the larger 16:9 file still wins."""
    entry, reason = choose(ladder(), None, (4032, 3024))
    assert entry["aspect"] == "16x9", reason
    assert reason.startswith("the largest file of each ratio (--long-side or --max-gmac for a smaller one): 3 of 6 "
                             "files; camera 4032x3024"), reason
    assert choose(catalog(), None, (1080, 1920))[1].startswith("camera 1080x1920")  # one tier: nothing to say
    # Files of different ratios all stay, whatever their long sides: a 9:16 file at 112 beside a 16:9 at 140.
    mixed = {**catalog(), "models": [model("9x16", 112, 70, ratio="9:16"), model("16x9", 70, 140, ratio="16:9")]}
    assert choose(mixed, None, (1080, 1920))[0]["aspect"] == "9x16"


def test_an_app_chooses_by_camera_within_a_long_side():
    entry, reason = choose(ladder(), None, (3024, 4032), long_side=518)
    assert entry["aspect"] == "3x4-518" and reason.startswith("long side 518: 3 of 6 files; camera 3024x4032")
    # The orientation note speaks of the same tier's files.
    assert "if your app feeds the frame landscape, pass 4032x3024: it gets 16x9-518" in reason


@pytest.mark.parametrize("tier, message", [
    ({"long_side": 640}, "no file of long side 640: the catalog's long sides are 518, 896"),
    ({"max_gmac": 20}, "no file within 20 GMAC: the cheapest, 9x16-518 (HxW 518x294), costs 38.9 GMAC per inference"),
])
def test_a_tier_the_catalog_lacks_is_refused_naming_what_it_has(tier, message):
    with pytest.raises(AspectError) as refused:
        choose(ladder(), None, (1080, 1920), **tier)
    assert str(refused.value) == message


def test_a_budget_needs_a_catalog_that_counted_gmac_and_a_camera():
    old = {**catalog(), "models": [{k: v for k, v in m.items() if k != "gpu_lint"} for m in catalog()["models"]]}
    with pytest.raises(AspectError, match="records no GMAC per file .* choose a tier by long side instead"):
        choose(old, None, (1080, 1920), max_gmac=100)
    assert choose(old, None, (1080, 1920), long_side=896)[0]["aspect"] == "9x16"
    with pytest.raises(PullError, match="--long-side and --max-gmac choose among the files a --camera fits"):
        choose(ladder(), "9x16", None, long_side=896)


@pytest.mark.parametrize("args, message", [
    (["--long-side", "0"], "argument --long-side: '0' must be a finite number above 0"),
    (["--max-gmac", "nan"], "argument --max-gmac: 'nan' must be a finite number above 0"),
    (["--max-gmac", "cheap"], "argument --max-gmac: 'cheap' is not a number"),
    (["--long-side", "518", "--max-gmac", "50"], "argument --max-gmac: not allowed with argument --long-side"),
])
def test_select_refuses_a_bad_tier_before_reading_the_repository(args, message, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["select", "--repo", "/nonexistent", "--version", "1.0.0", "--camera", "1080x1920", *args])
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_select_on_the_command_line_takes_the_budget(monkeypatch, capsys):
    unsigned = {"verified": False, "reason": "no key given"}
    monkeypatch.setattr("da3_litert_farm.client.cli.trusted_catalog", lambda *args, **kw: (ladder(), unsigned, None))
    assert main(["select", "--repo", "R", "--version", "1.0.0", "--camera", "1920x1080", "--max-gmac", "50"]) == 0
    out = capsys.readouterr().out
    assert "budget 50 GMAC: 2 of 6 files fit (long sides 518); camera 1920x1080" in out
    assert "\n16x9-518: artifacts/models/16x9-518/model_fp16.tflite sha256 " in out


def test_pull_of_the_bundle_refuses_a_tier_before_reading_the_catalog(tmp_path, monkeypatch):
    monkeypatch.setattr("da3_litert_farm.client.cli.read_catalog", lambda repo, version: pytest.fail("read"))
    with pytest.raises(PullError, match="--bundle holds every file"):
        pull("/nonexistent", "1.0.0", tmp_path / "out", bundle=True, max_gmac=50)
    assert not (tmp_path / "out").exists()


def test_a_stress_catalog_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    stress = catalog("random")
    monkeypatch.setattr("da3_litert_farm.client.cli.read_catalog", lambda repo, version: stress)
    monkeypatch.setattr("da3_litert_farm.client.cli.read_release",  # an unsigned release of it, at its tag
                        lambda repo, version: Release("catalog/v1.0.0", json.dumps(stress).encode(), None, None, ""))
    target = tmp_path / "app" / "assets"
    with pytest.raises(PullError, match=r"catalog 1.0.0 was built from stress weights: .* nothing was downloaded.*"
                                        r"--allow-stress"):
        pull("repo", "1.0.0", target, aspect="9x16", allow_unsigned=True)
    assert list(tmp_path.iterdir()) == []


def test_show_lists_every_model_with_its_figures_weights_and_tools():
    shown = summary(catalog())
    assert [(r["aspect"], r["height"], r["width"]) for r in shown["models"]] == [
        ("9x16", 896, 504), ("3x4", 896, 672), ("16x9", 504, 896)]
    assert shown["models"][0]["gpu"]["one_minus_pearson"] == pytest.approx(1 - 0.99941)
    assert shown["weights"] == {"kind": "trained", "source": "hub", "weights_sha256": "ab" * 32,
                                "origin": "Hugging Face depth-anything/DA3-SMALL at " + "0123abcd" * 5}
    text = format_summary(shown)
    assert "9x16        896x504    52.00  117.5       -  9x1600000000" in text  # made before the farm timed it
    assert "model" not in text.splitlines()[0]  # this catalog's checkpoint does not say which network
    older = catalog()
    del older["models"][1]["gpu_lint"]  # made before the farm counted multiply-accumulates
    assert "3x4         896x672    52.00      -       -  3x4000000000" in format_summary(summary(older))
    timed = catalog()
    timed["models"][0]["cost"] = {"cpu_ms": 1834.26, "cpu_threads": 2, "export_seconds": 80.1,
                                  "export_peak_rss_mib": 1247}
    assert "9x16        896x504    52.00  117.5    1834  9x1600000000" in format_summary(summary(timed))
    timed["models"][0]["cost"]["cpu_ms"] = "slow"
    with pytest.raises(CatalogError, match=r"^models.0.cost.cpu_ms"):
        summary(timed)
    accum = catalog()
    accum["models"][0]["gpu"]["modes"] = {"fp16_fp32_accum": {"precision": "fp16_fp32_accum", "pearson_min": 0.99952,
                                                              "mean_rel_max": 8.2e-3, "seconds": 90.0}}
    lines = format_summary(summary(accum)).splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("9x16 "))
    assert lines[row + 1].split() == ["4.8e-04", "8.2e-03", "in", "GPU", "mode", "fp16_fp32_accum"]
    assert lines[row + 2].startswith("3x4 ")
    for bad in ({"fp16_fp32_accum": {"pearson_min": "x", "mean_rel_max": 0.1}}, {"a\nb": {}}, []):
        accum["models"][0]["gpu"]["modes"] = bad
        with pytest.raises(CatalogError, match=r"^models.0.gpu.modes"):
            summary(accum)
    based = catalog()
    based["checkpoint"]["model_name"] = "da3-base"
    assert format_summary(summary(based)).splitlines()[0] == "da3-small-litert 1.0.0 (created 2026-12-05T00:00:00Z), model da3-base"
    assert "5.9e-04" in text and "litert-torch 0.10.0" in text and "WARNING" not in text
    stress = format_summary(summary(catalog("random")))
    assert "weights: stress: seeded random weights (seed 0)" in stress and "WARNING: STRESS WEIGHTS" in stress


def test_show_says_when_the_gpu_check_was_skipped():
    skipped = catalog()
    skipped["models"][0]["gpu"] = {"checked": False, "reason": "validation.gpu is 'skip' in params.yaml"}
    text = format_summary(summary(skipped))
    assert "not checked  validation.gpu is 'skip' in params.yaml" in text


def test_show_and_the_sidecar_say_what_the_output_is_and_how_to_get_metres():
    metric = catalog()
    metric["checkpoint"].update(repo="depth-anything/DA3METRIC-LARGE", model_name="da3metric-large")
    for m in metric["models"]:
        m.update(precision="fp16-weights", input={"shape": [1, 3, m["height"], m["width"]]},
                 output={"shape": [1, 1, m["height"], m["width"]], **output_entry(PRESETS["da3metric-large"])})
    lines = format_summary(summary(metric)).splitlines()
    assert [line for line in lines if line.startswith("output: ")] == [
        "output: metric depth; metres = output * focal_px / 300, focal_px = the mean of fx and fy in pixels of the "
        "model's input: the camera's focal length in pixels of its photo, times the scale the photo was resized by "
        "to fit the input"]
    car = sidecar(metric, metric["models"][0], "/srv/farm", "aspect 9x16", "model.tflite")
    assert car["output"]["kind"] == "metric depth" and car["output"]["metres"]["focal_divisor"] == 300
    relative = catalog()
    for m in relative["models"]:
        m["output"] = {"shape": [1, 1, m["height"], m["width"]], **output_entry(PRESETS["da3-small"])}
    assert "output: relative depth" in format_summary(summary(relative)).splitlines()
    metric["models"][1]["output"]["metres"] = {"formula": "x", "focal_px": "y", "focal_divisor": "300"}
    with pytest.raises(CatalogError, match=r"^models.1.output.metres.focal_divisor"):
        summary(metric)


def test_sidecars_never_record_a_credential_in_the_repository_url():
    assert public_repo("https://bob:s3cr3t@git.example.com/team/farm.git") == "https://git.example.com/team/farm.git"
    assert public_repo("ssh://git@git.example.com/team/farm.git") == "ssh://git.example.com/team/farm.git"
    assert public_repo("/srv/farm") == "/srv/farm"


def test_remote_schemes():
    assert [scheme(u) for u in ("s3://b/p", "ssh://h/p", "../../remote", "/srv/r", "C:/r")] == [
        "s3", "ssh", "local", "local", "local"]


def test_errors_are_named_from_the_cause_in_the_chain():
    def chained(outer: Exception, inner: Exception) -> Exception:
        try:
            try:
                raise inner
            except Exception as exc:
                raise outer from exc
        except Exception as exc:
            return exc

    where = "DVC remote 's3' (s3://b/p)"
    refused = chained(RuntimeError("failed to fetch"), PermissionError("InvalidAccessKeyId: no such key"))
    assert explain(refused, "s3", where).startswith(f"the {where} refused the credentials")
    assert "names a bucket that does not exist" in explain(chained(OSError("x"), FileNotFoundError("NoSuchBucket: b")),
                                                           "s3", where)
    assert explain(chained(OSError("x"), TimeoutError()), "ssh", where).startswith(f"no answer from the {where} within")
    assert explain(chained(OSError("x"), ConnectionRefusedError(111, "refused")), "ssh", where).startswith(
        f"cannot reach the {where} (ConnectionRefusedError")


def test_cli_help_says_camera_is_the_frame_after_rotation(capsys):
    with pytest.raises(SystemExit):
        main(["pull", "--help"])
    assert "the frame as it is fed to the model, after rotation" in " ".join(capsys.readouterr().out.split())


def test_show_json_prints_the_catalog_figures(capsys, monkeypatch):
    monkeypatch.setattr("da3_litert_farm.client.cli.read_catalog", lambda repo, version: catalog())
    assert main(["show", "--repo", "r", "--version", "1.0.0", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    # Expected values are read off the document `catalog()` and `model()` write above, by hand.
    assert (shown["name"], shown["version"], shown["created"]) == ("da3-small-litert", "1.0.0", "2026-12-05T00:00:00Z")
    rows = [(m["aspect"], m["ratio"], m["height"], m["width"], m["megabytes"], m["sha256"]) for m in shown["models"]]
    assert rows == [
        ("9x16", "504:896", 896, 504, 52.0, "9x16" + "0" * 60), ("3x4", "672:896", 896, 672, 52.0, "3x4" + "0" * 61),
        ("16x9", "896:504", 504, 896, 52.0, "16x9" + "0" * 60)]
    for m in shown["models"]:
        assert m["cpu"] == {"one_minus_pearson": pytest.approx(4e-7), "mean_rel_max": 8.1e-4,
                            "photos": ["astronaut", "coffee"]}
        assert m["gpu"] == {"checked": True, "one_minus_pearson": pytest.approx(5.9e-4), "mean_rel_max": 9.8e-3,
                            "photos": ["coffee"], "precision": "fp16",
                            "adapter": "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, CPU / Software)"}
    assert shown["weights"] == {"kind": "trained", "source": "hub", "weights_sha256": "ab" * 32,
                                "origin": "Hugging Face depth-anything/DA3-SMALL at " + "0123abcd" * 5}
    assert shown["warning"] is None and shown["bundle"] is None
    assert shown["tools"] == {"litert-torch": "0.10.0", "ai-edge-litert": "2.3.0"}
