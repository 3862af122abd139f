"""The light client's own logic, on catalogs written here: version order, orientation, `show`, sidecars.

Publishing and pulling through real remotes is tested in tests/test_publish_pull.py.
"""

from __future__ import annotations

import json
import random

import pytest

from da3_litert_farm.client.cli import choose, main, orientation_note, public_repo, pull, PullError
from da3_litert_farm.client.remote import explain, scheme
from da3_litert_farm.client.trust import Release
from da3_litert_farm.client.show import CatalogError, format_summary, summary
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
    note = orientation_note(catalog(), camera)
    w, h = camera
    assert note in reason
    assert f"{w}x{h} ({'landscape' if w > h else 'portrait'}) gets {picked}" in note
    assert f"pass {h}x{w}: it gets {rotated}" in note


def test_no_orientation_note_where_both_orientations_get_the_same_model():
    portrait_only = {**catalog(), "models": [model("9x16", 896, 504)]}
    assert orientation_note(portrait_only, (1920, 1080)) is None
    assert "\n" not in choose(portrait_only, None, (1920, 1080))[1]


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
    assert "9x16        896x504    52.00  117.5  9x1600000000" in text
    assert "model" not in text.splitlines()[0]  # this catalog's checkpoint does not say which network
    older = catalog()
    del older["models"][1]["gpu_lint"]  # made before the farm counted multiply-accumulates
    assert "3x4         896x672    52.00      -  3x4000000000" in format_summary(summary(older))
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
