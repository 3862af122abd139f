"""The light client's own logic, on catalogs written here: version order, orientation, `show`, sidecars.

Publishing and pulling through real remotes is tested in tests/test_publish_pull.py.
"""

from __future__ import annotations

import hashlib
import json
import random
import shlex

import pytest

from da3_litert_farm.client.catalog import PullError
from da3_litert_farm.client.choice import catalog_aspects, choose, orientation_note
from da3_litert_farm.client.cli import main
from da3_litert_farm.client.diff import diff, format_diff
from da3_litert_farm.client.pull import pull
from da3_litert_farm.client.sidecars import public_repo, sidecar
from da3_litert_farm.core.aspects import AspectError
from da3_litert_farm.client.remote import explain, scheme
from da3_litert_farm.client.trust import Release
from da3_litert_farm.client.show import CatalogError, check_catalog, format_summary, summary
from da3_litert_farm.core.models import PRESETS, output_entry
from da3_litert_farm.core.releases import version_key
from tests.doc_blocks import doc_block, fenced_blocks


def test_versions_sort_by_semantic_version_precedence():
    # The order semver.org's item 11 spells out, plus numeric parts past 9.
    ordered = ["0.9.0", "0.10.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
               "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0-rc.2", "1.0.0-rc.10", "1.0.0", "1.0.1", "1.10.0"]
    shuffled = ordered[:]
    random.Random(0).shuffle(shuffled)
    assert sorted(shuffled, key=version_key) == ordered


def model(aspect: str, height: int, width: int, tier: int = 896, name: str = "small", **extra) -> dict:
    """The catalog entry of cell NAME-TIER-ASPECT, as a farm writes it (schema 2)."""
    cell = f"{name}-{tier}-{aspect}"
    return {"cell": cell, "model": name, "tier": tier, "aspect": aspect,
            "ratio": extra.pop("ratio", f"{width}:{height}"), "height": height, "width": width,
            "file": f"artifacts/models/{cell}/model_fp16.tflite", "sha256": f"{cell:0<64}"[:64],
            "bytes": 52_000_000, "gpu_lint": {"gmac": 117.52}, "fidelity": {"pearson_min": 0.9999996, "mean_rel_error_max": 8.1e-4,
                                              "photos": {"coffee": 0.9999996, "astronaut": 0.9999998}},
            "gpu": {"checked": True, "pearson_min": 0.99941, "mean_rel_max": 9.8e-3, "photos": {"coffee": 0.99941},
                    "adapter": "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, CPU / Software)", "precision": "fp16"},
            **extra}


def source(kind: str = "hub", repo: str = "depth-anything/DA3-SMALL", preset: str = "da3-small") -> dict:
    """sources.<model>: its checkpoint provenance and licence, as a farm writes them."""
    checkpoint = {"source": kind, "repo": repo, "revision": "main", "resolved_revision": "0123abcd" * 5,
                  "path": None, "seed": 0, "model_name": preset, "weights_sha256": "ab" * 32}
    license_ = ({"code": "Apache-2.0", "weights": "none: stress weights (seeded random init, not a trained model)",
                 "weights_source": "random, seed 0", "attribution": None} if kind == "random" else
                {"code": "Apache-2.0", "weights": "Apache-2.0",
                 "weights_source": f"{repo} (ByteDance-Seed, Hugging Face Hub)",
                 "attribution": f"Depth Anything 3 ({repo.split('/')[1]}) by ByteDance-Seed, Apache-2.0"})
    return {"checkpoint": checkpoint, "license": license_}


def catalog(source_kind: str = "hub") -> dict:
    """One model, small, at one tier (896), three aspects; no bundle."""
    return {"schema_version": 2, "name": "da3-small-litert", "version": "1.0.0", "created": "2026-12-05T00:00:00Z",
            "sources": {"small": source(source_kind)}, "tools": {"litert-torch": "0.10.0", "ai-edge-litert": "2.3.0"},
            "models": [model("9x16", 896, 504), model("3x4", 896, 672), model("16x9", 504, 896)]}


def bundle(name: str, tier: int, entries: list[dict], sha256: str = "cd" * 32) -> dict:
    """bundles.<i>: model `name` at `tier`, a signature per entry (their aspects)."""
    return {"bundle": f"{name}-{tier}", "model": name, "tier": tier,
            "file": f"artifacts/bundles/{name}-{tier}/model_fp16.tflite", "sha256": sha256, "bytes": 1_000_000,
            "singles_bytes": 3_000_000, "precision": "fp16-weights",
            "signatures": [{"signature": m["aspect"], "cell": m["cell"], "height": m["height"], "width": m["width"],
                            "own_bytes": 1000} for m in entries],
            "gpu": {"checked": False, "reason": "validation.gpu is 'skip' in params.yaml"},
            "load": {"cpu": {"bundle": {"seconds": 0.5, "peak_growth_mib": 60}}}}


def runnable(doc: dict) -> dict:
    """`doc` with what a sidecar copies (precision, input, output) in every entry, as a farm writes it."""
    presets = {name: s["checkpoint"]["model_name"] for name, s in doc["sources"].items()}
    for m in doc["models"]:
        m.update(precision="fp16-weights", input={"shape": [1, 3, m["height"], m["width"]], "layout": "NCHW"},
                 output={"shape": [1, 1, m["height"], m["width"]], **output_entry(PRESETS[presets[m["model"]]])})
    return doc


@pytest.mark.parametrize("camera, picked, rotated", [
    ((4032, 3024), "small-896-16x9", "small-896-3x4"),  # a sensor size as Android reports it: a portrait app rotates it
    ((3024, 4032), "small-896-3x4", "small-896-16x9"),
    ((1920, 1080), "small-896-16x9", "small-896-9x16"),
])
def test_orientation_is_said_where_the_rotated_frame_gets_another_model(camera, picked, rotated):
    entry, reason = choose(catalog(), None, camera)
    assert entry["cell"] == picked
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
    """Model small at two resolution tiers, 896 and 518, each with the three aspects, with the GMAC the GPU lint
    counts for such files; a bundle per tier."""
    gmac = {"small-896-9x16": 117.5, "small-896-3x4": 157.3, "small-896-16x9": 117.5, "small-518-9x16": 38.9,
            "small-518-3x4": 52.0, "small-518-16x9": 38.9}
    shapes = {(896, "9x16"): (896, 504), (896, "3x4"): (896, 672), (896, "16x9"): (504, 896),
              (518, "9x16"): (518, 294), (518, "3x4"): (518, 392), (518, "16x9"): (294, 518)}
    entries = [model(aspect, h, w, tier=tier, ratio=aspect.replace("x", ":"),
                     gpu_lint={"gmac": gmac[f"small-{tier}-{aspect}"]}) for (tier, aspect), (h, w) in shapes.items()]
    return {**catalog(), "models": entries,
            "bundles": [bundle("small", 896, entries[:3]), bundle("small", 518, entries[3:], sha256="ef" * 32)]}


@pytest.mark.parametrize("camera, budget, picked", [
    ((1080, 1920), 200, "small-896-9x16"),  # portrait video; every file fits: the larger of the two 9:16 files
    ((1080, 1920), 50, "small-518-9x16"),   # a mid-range budget: only the 518 tier fits
    ((3024, 4032), 200, "small-896-3x4"),   # portrait stills
    ((3024, 4032), 50, "small-518-9x16"),   # small-518-3x4 costs 52.0: over budget, so the closest ratio that fits
    ((1920, 1080), 200, "small-896-16x9"),  # landscape video
    ((1920, 1080), 50, "small-518-16x9"),
    # Landscape stills, with no 4:3 file: 294x518 is a hair closer to 4:3 than 504x896 (W/H 1.7619 against 1.7778),
    # but within the budget the larger 16:9 file is the better one (found on a two-tier farm's catalog).
    ((4032, 3024), 200, "small-896-16x9"),
    ((4032, 3024), 50, "small-518-16x9"),
])
def test_an_app_chooses_by_camera_within_a_gmac_budget(camera, budget, picked):
    ladder_ = ladder()
    ladder_["models"] = [m for m in ladder_["models"] if camera != (4032, 3024) or m["aspect"] != "3x4"]
    del ladder_["bundles"]  # they name the 3x4 cells removed above
    entry, reason = choose(ladder_, None, camera, max_gmac=budget)
    assert entry["cell"] == picked, reason
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
    assert entry["cell"] == "small-896-16x9", reason
    assert reason.startswith("the largest file of each ratio (--long-side or --max-gmac for a smaller one): 3 of 6 "
                             "files; camera 4032x3024"), reason
    assert choose(catalog(), None, (1080, 1920))[1].startswith("camera 1080x1920")  # one tier: nothing to say
    # Files of different ratios all stay, whatever their long sides: a 9:16 file at 112 beside a 16:9 at 140.
    mixed = {**catalog(), "models": [model("9x16", 112, 70, tier=112, ratio="9:16"),
                                     model("16x9", 70, 140, tier=140, ratio="16:9")]}
    assert choose(mixed, None, (1080, 1920))[0]["cell"] == "small-112-9x16"


def test_an_app_chooses_by_camera_within_a_long_side():
    entry, reason = choose(ladder(), None, (3024, 4032), long_side=518)
    assert entry["cell"] == "small-518-3x4" and reason.startswith("long side 518: 3 of 6 files; camera 3024x4032")
    # The orientation note speaks of the same tier's files.
    assert "if your app feeds the frame landscape, pass 4032x3024: it gets small-518-16x9" in reason


@pytest.mark.parametrize("tier, message", [
    ({"long_side": 640}, "no file of long side 640: the catalog's long sides are 518, 896"),
    ({"max_gmac": 20}, "no file within 20 GMAC: the cheapest, small-518-9x16 (HxW 518x294), costs 38.9 GMAC per "
                       "inference"),
])
def test_a_tier_the_catalog_lacks_is_refused_naming_what_it_has(tier, message):
    with pytest.raises(AspectError) as refused:
        choose(ladder(), None, (1080, 1920), **tier)
    assert str(refused.value) == message


def test_a_budget_needs_a_catalog_that_counted_gmac_and_a_camera():
    old = {**catalog(), "models": [{k: v for k, v in m.items() if k != "gpu_lint"} for m in catalog()["models"]]}
    with pytest.raises(AspectError, match="records no GMAC per file .* choose a tier by long side instead"):
        choose(old, None, (1080, 1920), max_gmac=100)
    assert choose(old, None, (1080, 1920), long_side=896)[0]["cell"] == "small-896-9x16"
    with pytest.raises(PullError, match="--max-gmac chooses among the files a --camera fits; --aspect names one"):
        choose(ladder(), "9x16", None, max_gmac=200)


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
    assert "\nsmall-518-16x9: artifacts/models/small-518-16x9/model_fp16.tflite sha256 " in out
    # The app may ship the bundle of that tier instead: select says which, and how to pull it.
    assert ("in the bundle small-518: signature '16x9' of artifacts/bundles/small-518/model_fp16.tflite "
            "(farm pull --bundle --model small --long-side 518)") in out



def test_the_tier_commands_of_app_integration_run_as_printed(monkeypatch, capsys):
    """docs/app-integration.md's `farm select` lines for a tier, as printed, on ladder(): R and V are never read (the
    catalog reader stands in), every flag goes through the real parser. The output the page shows under them is
    found in what they print."""
    block = doc_block("docs/app-integration.md", "### Faster files: a model, a resolution tier or a budget")
    unsigned = {"verified": False, "reason": "no key given"}
    monkeypatch.setattr("da3_litert_farm.client.cli.trusted_catalog", lambda *args, **kw: (ladder(), unsigned, None))
    printed = []
    for command in block.commands:
        farm, *argv = shlex.split(command, comments=True)
        assert farm == "farm" and main(argv) == 0, f"{block.where()}: {command}\n{capsys.readouterr()}"
        printed.append(capsys.readouterr().out)
    shown = next(b for b in fenced_blocks(block.page) if b.line > block.line)
    assert shown.lang == "" and shown.lines, shown  # the output, in a bare fence after the commands
    missing = [line for line in shown.lines if not any(line in out for out in printed)]
    assert not missing, f"{shown.where()} shows what the commands above it do not print:\n" + "\n".join(missing)

def test_pull_of_the_bundle_refuses_a_budget_before_reading_the_catalog(tmp_path, monkeypatch):
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_catalog", lambda repo, version: pytest.fail("read"))
    with pytest.raises(PullError, match="--max-gmac chooses one file for a --camera; --bundle holds every aspect of "
                                        "one tier"):
        pull("/nonexistent", "1.0.0", tmp_path / "out", bundle=True, max_gmac=50)
    assert not (tmp_path / "out").exists()


def test_a_stress_catalog_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    stress = catalog("random")
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_catalog", lambda repo, version: stress)
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_release",  # an unsigned release of it, at its tag
                        lambda repo, version: Release("catalog/v1.0.0", json.dumps(stress).encode(), None, None, ""))
    target = tmp_path / "app" / "assets"
    with pytest.raises(PullError, match=r"catalog 1.0.0 was built from stress weights: .* nothing was downloaded.*"
                                        r"--allow-stress"):
        pull("repo", "1.0.0", target, aspect="9x16", allow_unsigned=True)
    assert list(tmp_path.iterdir()) == []


def test_show_lists_every_model_with_its_figures_weights_and_tools():
    shown = summary(catalog())
    assert [(r["cell"], r["model"], r["tier"], r["aspect"], r["height"], r["width"]) for r in shown["models"]] == [
        ("small-896-9x16", "small", 896, "9x16", 896, 504), ("small-896-3x4", "small", 896, "3x4", 896, 672),
        ("small-896-16x9", "small", 896, "16x9", 504, 896)]
    assert shown["models"][0]["gpu"]["one_minus_pearson"] == pytest.approx(1 - 0.99941)
    assert shown["weights"] == {"small": {"preset": "da3-small", "kind": "trained", "source": "hub",
                                          "weights_sha256": "ab" * 32,
                                          "origin": "Hugging Face depth-anything/DA3-SMALL at " + "0123abcd" * 5}}
    text = format_summary(shown)
    lines = text.splitlines()
    assert lines[0] == "da3-small-litert 1.0.0 (created 2026-12-05T00:00:00Z)"
    assert lines[1] == ("weights of small (da3-small): trained: Hugging Face depth-anything/DA3-SMALL at "
                        + "0123abcd" * 5 + ", sha256 abababababab")
    assert lines[2].split()[:4] == ["model", "tier", "aspect", "HxW"]
    assert "small  896 9x16        896x504    52.00  117.5       -  small-896-9x" in text  # made before it was timed
    older = catalog()
    del older["models"][1]["gpu_lint"]  # made before the farm counted multiply-accumulates
    assert "small  896 3x4         896x672    52.00      -       -  small-896-3x" in format_summary(summary(older))
    timed = catalog()
    timed["models"][0]["cost"] = {"cpu_ms": 1834.26, "cpu_threads": 2, "export_seconds": 80.1,
                                  "export_peak_rss_mib": 1247}
    assert "small  896 9x16        896x504    52.00  117.5    1834  small-896-9x" in format_summary(summary(timed))
    timed["models"][0]["cost"]["cpu_ms"] = "slow"
    with pytest.raises(CatalogError, match=r"^models.0.cost.cpu_ms"):
        summary(timed)
    accum = catalog()
    accum["models"][0]["gpu"]["modes"] = {"fp16_fp32_accum": {"precision": "fp16_fp32_accum", "pearson_min": 0.99952,
                                                              "mean_rel_max": 8.2e-3, "seconds": 90.0}}
    lines = format_summary(summary(accum)).splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("small  896 9x16 "))
    assert lines[row + 1].split() == ["4.8e-04", "8.2e-03", "in", "GPU", "mode", "fp16_fp32_accum"]
    assert lines[row + 1].index("4.8e-04") == lines[row].index("5.9e-04")  # under the GPU column
    assert lines[row + 2].startswith("small  896 3x4 ")
    for bad in ({"fp16_fp32_accum": {"pearson_min": "x", "mean_rel_max": 0.1}}, {"a\nb": {}}, []):
        accum["models"][0]["gpu"]["modes"] = bad
        with pytest.raises(CatalogError, match=r"^models.0.gpu.modes"):
            summary(accum)
    unnamed = catalog()
    del unnamed["sources"]["small"]["checkpoint"]["model_name"]  # the preset is printed only where recorded
    assert format_summary(summary(unnamed)).splitlines()[1].startswith("weights of small: trained: Hugging Face")
    assert "5.9e-04" in text and "litert-torch 0.10.0" in text and "WARNING" not in text
    assert ("license of small: code Apache-2.0; weights Apache-2.0 (commercial use: yes); credit: Depth Anything 3 "
            "(DA3-SMALL) by ByteDance-Seed, Apache-2.0") in text.splitlines()
    stress = format_summary(summary(catalog("random")))
    assert "weights of small (da3-small): stress: seeded random weights (seed 0)" in stress
    assert "WARNING: STRESS WEIGHTS: built from seeded random weights (models.<name>.source: random)" in stress


def test_show_lists_the_ladder_by_model_and_tier_with_weights_bundles_and_licence_per_model():
    doc = two_models()
    doc["models"] = [doc["models"][i] for i in (0, 3, 4, 1, 2)]  # interleaved: show groups them again
    shown = summary(doc)
    assert [r["cell"] for r in shown["models"]] == ["small-896-9x16", "small-896-16x9", "small-518-9x16",
                                                    "metric-896-3x4", "metric-896-9x16"]
    lines = format_summary(shown).splitlines()
    assert [line for line in lines if line.startswith("weights of ")] == [
        "weights of small (da3-small): trained: Hugging Face depth-anything/DA3-SMALL at " + "0123abcd" * 5
        + ", sha256 abababababab",
        "weights of metric (da3metric-large): trained: Hugging Face depth-anything/DA3METRIC-LARGE at "
        + "0123abcd" * 5 + ", sha256 abababababab"]
    rows = [line.split()[:4] for line in lines if line.startswith(("small ", "metric "))]
    assert rows == [["small", "896", "9x16", "896x504"], ["small", "896", "16x9", "504x896"],
                    ["small", "518", "9x16", "518x294"], ["metric", "896", "3x4", "896x672"],
                    ["metric", "896", "9x16", "896x504"]]
    assert [line for line in lines if line.startswith("bundle ")] == [
        "bundle small-896: 1.00 MB, sha256 cdcdcdcdcdcd, signatures 9x16, 16x9",
        "bundle small-518: 1.00 MB, sha256 efefefefefef, signatures 9x16",
        "bundle metric-896: 1.00 MB, sha256 cdcdcdcdcdcd, signatures 9x16, 3x4"]
    assert [line.split(";")[0] for line in lines if line.startswith("output ")] == [
        "output of small: relative depth", "output of metric: metric depth"]
    assert [line.split(";")[:2] for line in lines if line.startswith("license ")] == [
        ["license of small: code Apache-2.0", " weights Apache-2.0 (commercial use: yes)"],
        ["license of metric: code Apache-2.0", " weights Apache-2.0 (commercial use: yes)"]]
    assert shown["license"]["metric"]["weights_source"] == "depth-anything/DA3METRIC-LARGE (ByteDance-Seed, Hugging Face Hub)"
    assert [(b["bundle"], b["model"], b["tier"], b["signatures"]) for b in shown["bundles"]] == [
        ("small-896", "small", 896, ["9x16", "16x9"]), ("small-518", "small", 518, ["9x16"]),
        ("metric-896", "metric", 896, ["9x16", "3x4"])]


def test_show_says_when_the_gpu_check_was_skipped():
    skipped = catalog()
    skipped["models"][0]["gpu"] = {"checked": False, "reason": "validation.gpu is 'skip' in params.yaml"}
    text = format_summary(summary(skipped))
    assert "not checked  validation.gpu is 'skip' in params.yaml" in text


def test_show_and_the_sidecar_say_what_the_output_is_and_how_to_get_metres():
    metric = catalog()
    metric["sources"]["small"] = source(repo="depth-anything/DA3METRIC-LARGE", preset="da3metric-large")
    runnable(metric)
    lines = format_summary(summary(metric)).splitlines()
    assert [line for line in lines if line.startswith("output ")] == [
        "output of small: metric depth; metres = output * focal_px / 300, focal_px = the mean of fx and fy in pixels "
        "of the model's input: the camera's focal length in pixels of its photo, times the scale the photo was "
        "resized by to fit the input"]
    car = sidecar(metric, metric["models"][0], "/srv/farm", "aspect 9x16", "model.tflite")
    assert car["output"]["kind"] == "metric depth" and car["output"]["metres"]["focal_divisor"] == 300
    relative = runnable(catalog())
    assert "output of small: relative depth" in format_summary(summary(relative)).splitlines()
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
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_catalog", lambda repo, version: catalog())
    assert main(["show", "--repo", "r", "--version", "1.0.0", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    # Expected values are read off the document `catalog()` and `model()` write above, by hand.
    assert (shown["name"], shown["version"], shown["created"]) == ("da3-small-litert", "1.0.0", "2026-12-05T00:00:00Z")
    rows = [(m["cell"], m["model"], m["tier"], m["aspect"], m["ratio"], m["height"], m["width"], m["megabytes"],
             m["sha256"]) for m in shown["models"]]
    assert rows == [
        ("small-896-9x16", "small", 896, "9x16", "504:896", 896, 504, 52.0, "small-896-9x16" + "0" * 50),
        ("small-896-3x4", "small", 896, "3x4", "672:896", 896, 672, 52.0, "small-896-3x4" + "0" * 51),
        ("small-896-16x9", "small", 896, "16x9", "896:504", 504, 896, 52.0, "small-896-16x9" + "0" * 50)]
    for m in shown["models"]:
        assert m["cpu"] == {"one_minus_pearson": pytest.approx(4e-7), "mean_rel_max": 8.1e-4,
                            "photos": ["astronaut", "coffee"]}
        assert m["gpu"] == {"checked": True, "one_minus_pearson": pytest.approx(5.9e-4), "mean_rel_max": 9.8e-3,
                            "photos": ["coffee"], "precision": "fp16",
                            "adapter": "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, CPU / Software)"}
    assert shown["weights"] == {"small": {"preset": "da3-small", "kind": "trained", "source": "hub",
                                          "weights_sha256": "ab" * 32,
                                          "origin": "Hugging Face depth-anything/DA3-SMALL at " + "0123abcd" * 5}}
    assert shown["license"] == {"small": {"code": "Apache-2.0", "weights": "Apache-2.0", "commercial_use": "yes",
                                          "weights_source": "depth-anything/DA3-SMALL (ByteDance-Seed, Hugging Face Hub)",
                                          "attribution": "Depth Anything 3 (DA3-SMALL) by ByteDance-Seed, Apache-2.0"}}
    assert shown["warning"] is None and shown["bundles"] == []
    assert shown["tools"] == {"litert-torch": "0.10.0", "ai-edge-litert": "2.3.0"}


# ---- a catalog of several models and tiers (schema 2) ----

def two_models() -> dict:
    """Model small (relative depth) at 896 (9x16, 16x9) and 518 (9x16); model metric (metric depth) at 896 (3x4,
    9x16); a bundle per model and tier."""
    small = [model("9x16", 896, 504, ratio="9:16"), model("16x9", 504, 896, ratio="16:9"),
             model("9x16", 518, 294, tier=518, ratio="9:16")]
    metric = [model("3x4", 896, 672, name="metric", ratio="3:4"), model("9x16", 896, 504, name="metric", ratio="9:16")]
    doc = {**catalog(), "models": small + metric,
           "sources": {"small": source(),
                       "metric": source(repo="depth-anything/DA3METRIC-LARGE", preset="da3metric-large")},
           "bundles": [bundle("small", 896, small[:2]), bundle("small", 518, small[2:], sha256="ef" * 32),
                       bundle("metric", 896, metric[::-1])]}
    return runnable(doc)


def test_a_catalog_of_two_models_needs_model_to_choose():
    with pytest.raises(PullError) as refused:
        choose(two_models(), None, (1080, 1920))
    assert str(refused.value) == ("catalog 1.0.0 holds models small (relative depth), metric (metric depth): "
                                  "choose one with --model")
    with pytest.raises(PullError) as refused:
        choose(two_models(), "9x16", None, long_side=896)
    assert "choose one with --model" in str(refused.value)
    with pytest.raises(PullError) as refused:
        choose(two_models(), None, (1080, 1920), model="large")
    assert str(refused.value) == ("model 'large' is not in catalog 1.0.0; it holds models small (relative depth), "
                                  "metric (metric depth)")
    # A cell names its model: no --model needed, and a --model that disagrees is refused.
    assert choose(two_models(), "metric-896-9x16", None)[0]["model"] == "metric"
    with pytest.raises(PullError, match=r"^cell metric-896-9x16 is of model metric, not --model small$"):
        choose(two_models(), "metric-896-9x16", None, model="small")


def test_model_chooses_among_that_models_files_only():
    # Portrait stills: metric's 3x4 is the closest ratio in the catalog, but small has no 3x4.
    entry, reason = choose(two_models(), None, (3024, 4032), model="small")
    assert entry["cell"] == "small-896-9x16", reason
    assert reason.startswith("model small; "), reason
    assert "metric" not in reason.split("; ", 1)[1]  # the note on the rotated frame speaks of small's files too
    entry, reason = choose(two_models(), None, (3024, 4032), model="metric")
    assert entry["cell"] == "metric-896-3x4", reason
    with pytest.raises(PullError) as refused:
        choose(two_models(), "3x4", None, model="small")
    assert str(refused.value).startswith("aspect '3x4' is not in catalog 1.0.0; available: ['16x9', '9x16']")
    assert choose(two_models(), "3x4", None, model="metric")[0]["cell"] == "metric-896-3x4"


def test_an_aspect_at_two_tiers_needs_long_side():
    with pytest.raises(PullError) as refused:
        choose(ladder(), "9x16", None)
    assert str(refused.value) == ("aspect 9x16 of model small is at 2 long sides in catalog 1.0.0: small-896-9x16, "
                                  "small-518-9x16; choose one with --long-side, or name the cell")
    entry, reason = choose(ladder(), "9x16", None, long_side=518)
    assert (entry["cell"], entry["height"], entry["width"]) == ("small-518-9x16", 518, 294)
    assert reason == "aspect 9x16 requested: small-518-9x16"
    assert choose(ladder(), "small-896-9x16", None)[0]["height"] == 896  # a cell name needs no tier
    with pytest.raises(PullError, match=r"^aspect 9x16 of model small is not at long side 640 in catalog 1.0.0: its "
                                        r"long sides are 518, 896$"):
        choose(ladder(), "9x16", None, long_side=640)
    with pytest.raises(PullError, match=r"^cell small-896-9x16 is of long side 896, not --long-side 518$"):
        choose(ladder(), "small-896-9x16", None, long_side=518)


def test_select_takes_model_on_the_command_line(monkeypatch, capsys):
    unsigned = {"verified": False, "reason": "no key given"}
    monkeypatch.setattr("da3_litert_farm.client.cli.trusted_catalog",
                        lambda *args, **kw: (two_models(), unsigned, None))
    assert main(["select", "--repo", "R", "--version", "1.0.0", "--aspect", "9x16", "--model", "metric"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("aspect 9x16 requested: metric-896-9x16\n"
                          "metric-896-9x16: artifacts/models/metric-896-9x16/model_fp16.tflite sha256 ")
    assert "in the bundle metric-896: signature '9x16' of artifacts/bundles/metric-896/model_fp16.tflite" in out
    assert main(["select", "--repo", "R", "--version", "1.0.0", "--camera", "1080x1920"]) == 1
    assert "farm select: catalog 1.0.0 holds models small (relative depth), metric (metric depth)" in (
        capsys.readouterr().err)


def old_catalog_reader(monkeypatch, document: dict) -> None:
    """The client's view of a repository whose tag 1.0.0 holds `document` (DVC and git stand in)."""
    class Api:
        @staticmethod
        def read(path, repo, rev):
            return json.dumps(document)

    monkeypatch.setattr("da3_litert_farm.client.catalog.published_versions", lambda repo: ["1.0.0"])
    monkeypatch.setattr("da3_litert_farm.client.catalog._dvc_api", lambda: (Api, OSError))


def test_a_catalog_of_schema_1_is_refused_naming_the_client_to_use(monkeypatch, capsys):
    old = {"schema_version": 1, "name": "da3-small-litert", "version": "1.0.0",
           "checkpoint": {"source": "hub", "repo": "depth-anything/DA3-SMALL"},
           "models": [{"aspect": "9x16", "ratio": "9:16", "height": 896, "width": 504}]}
    old_catalog_reader(monkeypatch, old)
    assert main(["show", "--repo", "R", "--version", "1.0.0"]) == 1
    assert capsys.readouterr().err == (
        "farm show: the catalog of 1.0.0 in R is not one the client can use: catalog schema_version 1 was written by "
        "a farm before models x tiers; this client reads 2: pull it with the client of that farm's release\n")
    del old["schema_version"]
    with pytest.raises(CatalogError, match=r"^a catalog without schema_version was written by a farm before models x "
                                           r"tiers; this client reads 2"):
        summary(old)
    with pytest.raises(CatalogError, match=r"^catalog schema_version 3 was written by a farm newer than this client"):
        summary({**catalog(), "schema_version": 3})
    with pytest.raises(CatalogError, match=r"^schema_version: '2' is not the schema version 2$"):
        summary({**catalog(), "schema_version": "2"})


def test_pull_of_the_bundle_of_a_model_of_two_tiers_needs_long_side(tmp_path, monkeypatch):
    doc = runnable(ladder())
    payload = b"the bundle of small at 518"
    doc["bundles"][1].update(sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload))
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_catalog", lambda repo, version: doc)
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_release",  # an unsigned release of it, at its tag
                        lambda repo, version: Release("catalog/v1.0.0", json.dumps(doc).encode(), None, None, ""))
    downloads = []
    monkeypatch.setattr("da3_litert_farm.client.pull.download",
                        lambda path, repo, rev, remote, dest: (downloads.append(path), dest.write_bytes(payload)))
    target = tmp_path / "app" / "assets"
    with pytest.raises(PullError) as refused:
        pull("repo", "1.0.0", target, bundle=True, allow_unsigned=True)
    assert str(refused.value) == ("model small has a bundle per long side in catalog 1.0.0 (896, 518): choose one "
                                  "with --long-side")
    assert downloads == [] and list(tmp_path.iterdir()) == []
    path, reason = pull("repo", "1.0.0", target, bundle=True, allow_unsigned=True, long_side=518)
    assert downloads == ["artifacts/bundles/small-518/model_fp16.tflite"]
    assert path == target / "da3-small-litert-small-518-bundle-fp16.tflite" and path.read_bytes() == payload
    assert reason == "bundle small-518 of 9x16, 3x4, 16x9"
    side = json.loads(path.with_name(f"{path.name}.json").read_text())
    assert (side["kind"], side["bundle"], side["model"], side["tier"]) == ("bundle", "small-518", "small", 518)
    assert [(s["signature"], s["cell"], s["ratio"]) for s in side["signatures"]] == [
        ("9x16", "small-518-9x16", "9:16"), ("3x4", "small-518-3x4", "3:4"), ("16x9", "small-518-16x9", "16:9")]
    assert side["signatures"][0]["input"] == {"shape": [1, 3, 518, 294], "layout": "NCHW"}
    assert side["license"]["weights"] == "Apache-2.0"


def test_a_pulled_file_and_its_sidecar_name_its_cell_and_its_models_licence(tmp_path, monkeypatch):
    doc = two_models()
    doc["sources"]["metric"]["license"] = {"code": "Apache-2.0", "weights": "CC-BY-NC-4.0",
                                           "weights_source": "depth-anything/DA3METRIC-LARGE", "attribution": None}
    payload = b"metric 3x4"
    doc["models"][3].update(sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload))
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_catalog", lambda repo, version: doc)
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_release",
                        lambda repo, version: Release("catalog/v1.0.0", json.dumps(doc).encode(), None, None, ""))
    monkeypatch.setattr("da3_litert_farm.client.pull.download",
                        lambda path, repo, rev, remote, dest: dest.write_bytes(payload))
    assert main(["pull", "--repo", "R", "--version", "1.0.0", "--model", "metric", "--camera", "3024x4032",
                 "--out", str(tmp_path), "--allow-unsigned"]) == 0
    path = tmp_path / "da3-small-litert-metric-896-3x4-896x672-fp16.tflite"
    side = json.loads(path.with_name(f"{path.name}.json").read_text())
    assert (side["cell"], side["model"], side["tier"], side["aspect"], side["ratio"]) == (
        "metric-896-3x4", "metric", 896, "3x4", "3:4")
    assert side["license"]["weights"] == "CC-BY-NC-4.0" and side["output"]["kind"] == "metric depth"
    assert side["license"]["commercial_use"] == "no"  # said by the sidecar, though this catalog did not record it
    assert side["selected"].startswith("model metric; camera 3024x4032")


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["models"][2].update(cell="small-896-9x16"),  # the tier says 518
     r"^models.2.cell: 'small-896-9x16' is not 'small-518-9x16', the name its model, tier and aspect make$"),
    (lambda d: d["models"][0].update(cell="../../x"),
     r"^models.0.cell: '../../x' is not 'small-896-9x16'"),
    (lambda d: d["models"][3].update(model="large"),
     r"^models.3.model: 'large' is not a model of sources \(small, metric\)$"),
    (lambda d: d["models"][0].update(model="small-896"),
     r"^models.0.model: 'small-896' is not a model name \(lowercase letters, digits and '_', no '-'\)$"),
    (lambda d: d["models"][0].update(tier=True), r"^models.0.tier: True is not an integer in \[1, 2016\]$"),
    (lambda d: d["models"][0].update(aspect="bundle"), r"^models.0.aspect: 'bundle' is not an aspect name other "),
    (lambda d: d["models"].append(dict(d["models"][0])), r"^models: .* is not a list of distinct cells$"),
    (lambda d: d["sources"].update({"Big": d["sources"]["small"]}), r"^sources: 'Big' is not a model name"),
    (lambda d: d["sources"]["metric"]["checkpoint"].update(source="s3"),
     r"^sources.metric.checkpoint.source: 's3' is not one of \['hub', 'local', 'random'\]$"),
    (lambda d: d["sources"]["metric"].update(license={"code": "Apache-2.0"}),
     r"^sources.metric.license.weights is missing$"),
    (lambda d: d["bundles"][0].update(bundle="small-518"),
     r"^bundles.0.bundle: 'small-518' is not 'small-896', the name its model and tier make$"),
    (lambda d: d["bundles"][0]["signatures"][0].update(cell="small-518-9x16"),  # another tier's file
     r"^bundles.0.signatures.0.cell: 'small-518-9x16' is not a cell of model small at tier 896 in models$"),
    (lambda d: d["bundles"][0]["signatures"][0].update(signature="16x9"),
     r"^bundles.0.signatures.0.signature: '16x9' is not '9x16', the aspect of its cell$"),
    (lambda d: d.update(bundles=d["bundles"] + d["bundles"][:1]), r"^bundles: .* is not a list of distinct bundles"),
])
def test_check_catalog_refuses_cells_and_bundles_whose_names_disagree_with_their_parts(edit, message):
    doc = two_models()
    check_catalog(doc)
    edit(doc)
    with pytest.raises(CatalogError, match=message):
        check_catalog(doc)


def test_diff_compares_file_by_cell_so_an_aspect_at_two_tiers_is_two_rows(monkeypatch):
    old, new = catalog(), ladder()
    new["models"][0]["sha256"] = "f" * 64  # small-896-9x16 rebuilt
    monkeypatch.setattr("da3_litert_farm.client.diff.read_catalog",
                        lambda repo, version: {"1.0.0": old, "1.1.0": new}[version])
    rows = {r["cell"]: r for r in diff("R", "1.0.0", "1.1.0")}
    assert {cell: r["change"] for cell, r in rows.items()} == {
        "small-896-9x16": "changed", "small-896-3x4": "same", "small-896-16x9": "same",
        "small-518-9x16": "added", "small-518-3x4": "added", "small-518-16x9": "added"}
    assert rows["small-518-9x16"]["shape"] == "518x294"
    lines = format_diff(list(rows.values()), "1.0.0", "1.1.0").splitlines()
    assert lines[1].split()[:2] == ["cell", "change"]
    assert any(line.split()[:3] == ["small-518-9x16", "added", "518x294"] for line in lines)
