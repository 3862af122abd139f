"""Publish a tiny catalog to a local-directory DVC remote, then pull it from a separate clone.

Layout, as on one machine: <root>/farm (the farm), <root>/da3-farm-remote (the default
remote: a sibling of the checkout), <root>/app* (clones an app build would use).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from da3_litert_farm.client.remote import ANSWER_TIMEOUT_S, CONNECT_TIMEOUT_S
from da3_litert_farm.core.fileio import sha256_file
from da3_litert_farm.ops.signing import signing_key
from da3_litert_farm.report.report_check import check_report
from tests.doc_blocks import readme_block
from tests.farm_repo import Farm, repo_files
from tests.fault_farm import ASPECTS as TINY, copy_farm
from tests.remote_servers import S3, SSH, free_port, s3_server, silent_server, ssh_server

REPO = Path(__file__).resolve().parents[1]
FARM_BIN = Path(sys.executable).parent / "farm"


def run(*cmd, cwd, env, ok=True):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def farm_cli(*args, env, cwd, ok=True):
    return run(FARM_BIN, *args, cwd=cwd, env=env, ok=ok)


def listing(directory: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(directory.iterdir())} if directory.exists() else {}


# What these tiny stress farms need to publish (a skipped GPU check, stress weights); ALLOW adds --unsigned, for the
# releases that are not about signing (the signed ones are at the end, with a throwaway key).
CHECKS = ("--allow-unchecked-gpu", "--allow-stress")
ALLOW = (*CHECKS, "--unsigned")


@pytest.fixture(scope="module")
def published(module_dir, fault_template):
    """A stress-weights farm with versions 0.1.0 and 0.2.0 (16x9 rebuilt at another shape) published.

    A copy of the fault suite's built farm (tests/fault_farm.py: TINY, stress weights, committed as catalog
    0.1.0); the GPU path is tested in test_farm_e2e, here its skip path: refused, then allowed explicitly."""
    root = module_dir("publish")
    farm = copy_farm(fault_template, root)
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", cwd=farm.root, env=farm.env, ok=False)
    assert ("cells small-112-9x16, small-112-3x4, small-112-16x9 were never run on the GPU accelerator "
            "(validation.gpu: skip)") in out
    assert "--allow-unchecked-gpu" in out and not farm.git("tag").strip()
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", "--allow-unchecked-gpu", cwd=farm.root, env=farm.env,
              ok=False)
    assert ("catalog 0.1.0 was built from stress weights (models.small.source: random, seed 0): its models "
            "compute noise, not depth") in out
    assert "--allow-stress" in out and not farm.git("tag").strip()
    keyless = {**farm.env, "FARM_SIGNING_KEY": str(root / "no-such-key.pem")}
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", *CHECKS, cwd=farm.root, env=keyless, ok=False)
    assert (f"no publisher key at {root / 'no-such-key.pem'}: `make keys` writes a new pair there, or set "
            "FARM_SIGNING_KEY to the team's key; `make publish ARGS=--unsigned` publishes without a signature") in out
    assert not farm.git("tag").strip() and not farm.git("status", "--porcelain").strip()  # refused before any change
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", *ALLOW, cwd=farm.root, env=farm.env)
    assert ("published da3-small-litert 0.1.0 as catalog/v0.1.0: 3 files and 1 bundle "
            "(STRESS WEIGHTS: --allow-stress)") in out
    assert "; UNSIGNED (--unsigned): apps that pin a publisher key refuse it" in out
    assert "unsigned: published with --unsigned" in farm.git("tag", "-l", "--format=%(contents)", "catalog/v0.1.0")
    return root, farm


def test_a_stress_catalog_says_so_in_the_catalog_and_every_tag(published):
    _, farm = published
    catalog = farm.catalog()
    assert catalog["sources"]["small"]["checkpoint"]["source"] == "random"
    assert catalog["warning"].startswith("STRESS WEIGHTS")
    for tag in ["catalog/v0.1.0", "da3-small-litert-small-112-bundle@v0.1.0"] + [
            f"da3-small-litert-small-112-{a}@v0.1.0" for a in TINY]:
        assert "STRESS WEIGHTS" in farm.git("tag", "-l", "-n99", tag), tag
    labels = yaml.safe_load((farm.root / "dvc.yaml").read_text())["artifacts"]["da3-small-litert-small-112-3x4"]["labels"]
    assert "stress-weights" in labels


def test_trained_weights_need_no_stress_flag():
    from da3_litert_farm.ops.publish import PublishError, check_stress

    catalog = {"version": "1.0.0", "sources": {"small": {"checkpoint": {"source": "local", "seed": None}},
                                               "base": {"checkpoint": {"source": "hub", "seed": None}}}}
    check_stress(catalog, allow_stress=False)  # local (and hub) weights publish without the flag
    catalog["sources"]["base"]["checkpoint"].update(source="random", seed=3)
    with pytest.raises(PublishError, match=r"stress weights \(models.base.source: random, seed 3\)"):
        check_stress(catalog, allow_stress=False)
    check_stress(catalog, allow_stress=True)


def test_a_skipped_gpu_check_is_visible_in_the_catalog(published):
    _, farm = published
    for m in farm.catalog()["models"]:
        assert m["gpu"] == {"checked": False, "reason": "validation.gpu is 'skip' in params.yaml"}
    # The report draws the CPU's depth instead, and says so; the stress banner is on top.
    page = (farm.root / "artifacts/report/index.html").read_text()
    assert page.count("shipped .tflite on the CPU (XNNPACK): the GPU check was skipped") == 3 * 3
    assert "GPU accelerator, FP16" not in page
    assert '<div class="warning" role="alert" id="warning">STRESS WEIGHTS' in page
    assert page.count("<td>skipped: validation.gpu is &#x27;skip&#x27; in params.yaml</td>") == 3
    problems, _ = check_report(farm.root / "artifacts/report/index.html", farm.catalog(), screenshot=None)
    assert problems == []


def test_publish_pushed_files_tagged_and_declared_artifacts(published):
    root, farm = published
    remote = root / "da3-farm-remote"
    catalog = farm.catalog()
    for m in catalog["models"] + [catalog["bundles"][0]]:
        md5 = hashlib.md5((farm.root / m["file"]).read_bytes()).hexdigest()
        assert (remote / "files" / "md5" / md5[:2] / md5[2:]).is_file()
    assert {"catalog/v0.1.0", "da3-small-litert-small-112-9x16@v0.1.0", "da3-small-litert-small-112-bundle@v0.1.0"} <= set(
        farm.git("tag").split())
    artifacts = yaml.safe_load((farm.root / "dvc.yaml").read_text())["artifacts"]
    assert set(artifacts) == {"da3-small-litert-small-112-9x16", "da3-small-litert-small-112-3x4", "da3-small-litert-small-112-16x9",
                              "da3-small-litert-small-112-bundle"}
    assert artifacts["da3-small-litert-small-112-bundle"]["meta"]["signatures"] == {
        "9x16": [1, 3, 112, 70], "3x4": [1, 3, 112, 84], "16x9": [1, 3, 70, 112]}
    meta = artifacts["da3-small-litert-small-112-9x16"]["meta"]
    assert meta["shape"] == [1, 3, 112, 70] and meta["precision"] == "fp16-weights" and meta["aspect"] == "9x16"
    assert artifacts["da3-small-litert-small-112-9x16"]["type"] == "model"
    # Plain DVC fetches the published model by artifact name and by path at the tag.
    got = root / "got"
    run(sys.executable, "-m", "dvc", "artifacts", "get", farm.root, "da3-small-litert-small-112-9x16", "--rev", "v0.1.0",
        "-o", got / "by-name.tflite", cwd=root, env=farm.env)
    run(sys.executable, "-m", "dvc", "get", farm.root, "artifacts/models/small/112/9x16/model_fp16.tflite", "--rev",
        "catalog/v0.1.0", "-o", got / "by-path.tflite", cwd=root, env=farm.env)
    expected = next(m["sha256"] for m in catalog["models"] if m["aspect"] == "9x16")
    assert sha256_file(got / "by-name.tflite") == sha256_file(got / "by-path.tflite") == expected
    assert farm.git("status", "--porcelain").strip() == ""  # publish committed what it wrote


def test_publish_refusals(published):
    _, farm = published
    (farm.root / "notes.txt").write_text("wip")
    assert "working tree is dirty" in run(sys.executable, "-m", "da3_litert_farm.ops.publish", cwd=farm.root, env=farm.env, ok=False)
    (farm.root / "notes.txt").unlink()

    # A catalog that an ignore rule hides from git: `git status` is clean, but the tags would lack it.
    exclude = farm.root / ".git/info/exclude"
    rules = exclude.read_text()
    exclude.write_text(rules + "artifacts/catalog.json\n")
    farm.git("rm", "-q", "--cached", "artifacts/catalog.json")
    farm.git("commit", "-qm", "catalog untracked")
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", *ALLOW, cwd=farm.root, env=farm.env, ok=False)
    assert ("artifacts/catalog.json is not tracked by git, so the release tags would lack it and no app could read "
            "them (ignored by .git/info/exclude:") in out
    assert "git add -f artifacts/catalog.json" in out
    exclude.write_text(rules)
    farm.git("add", "artifacts/catalog.json")
    farm.git("commit", "-qm", "catalog tracked again")

    # Rebuild 16x9 at another shape but keep the version: refused, nothing tagged or pushed.
    doc = farm.params
    doc["aspects"]["16x9"] = {"ratio": "2:1"}  # 56x112
    farm.set_params(doc)
    ran, _ = farm.repro()
    assert ran == {"params", "bundle@small-112", "catalog", "report"} | {
        f"{stage}@small-112-16x9" for stage in ("patch", "export", "quantize", "validate", "npu", "gpu")}
    farm.git("add", "-A")
    farm.git("commit", "-qm", "16x9 at 2:1")
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", *ALLOW, cwd=farm.root, env=farm.env, ok=False)
    assert "catalog 0.1.0 is already published with other files (da3-small-litert-small-112-16x9:" in out
    assert "da3-small-litert-small-112-bundle:" in out  # the bundle holds the rebuilt 16x9 too
    assert "bump catalog.version" in out

    doc["catalog"]["version"] = "0.2.0"
    farm.set_params(doc)
    assert farm.repro()[0] == {"params", "catalog", "report"}
    farm.git("add", "-A")
    farm.git("commit", "-qm", "catalog 0.2.0")
    assert "published da3-small-litert 0.2.0" in run(sys.executable, "-m", "da3_litert_farm.ops.publish", *ALLOW,
                                                     cwd=farm.root, env=farm.env)
    # Going back to an older version is refused.
    doc["catalog"]["version"] = "0.0.9"
    farm.set_params(doc)
    farm.repro()
    farm.git("add", "-A")
    farm.git("commit", "-qm", "older")
    assert "older than the newest published 0.2.0" in run(sys.executable, "-m", "da3_litert_farm.ops.publish",
                                                           *ALLOW, cwd=farm.root, env=farm.env,
                                                           ok=False)


@pytest.fixture(scope="module")
def app_clone(published):
    root, farm = published
    run("git", "clone", "-q", farm.root, root / "app", cwd=root, env=farm.env)
    return root / "app", farm.env


@pytest.mark.parametrize("camera, aspect, shape", [("1080x1920", "9x16", (112, 70)), ("3024x4032", "3x4", (112, 84)),
                                                   ("1920x1080", "16x9", (70, 112))])
def test_pull_by_camera_from_a_clone(app_clone, tmp_path, camera, aspect, shape):
    app, env = app_clone
    target = tmp_path / "assets"
    out = farm_cli("pull", "--allow-stress", "--allow-unsigned", "--repo", app, "--version", "0.1.0", "--camera", camera, "--out", target, env=env, cwd=tmp_path)
    assert f"-> small-112-{aspect} " in out
    model = target / f"da3-small-litert-small-112-{aspect}-{shape[0]}x{shape[1]}-fp16.tflite"
    side = json.loads((target / f"{model.name}.json").read_text())
    assert side["sha256"] == sha256_file(model)
    assert side["input"]["shape"] == [1, 3, *shape] and side["input"]["layout"] == "NCHW"
    assert side["input"]["preprocessing"]["mean"] == [0.485, 0.456, 0.406]
    assert side["catalog"]["version"] == "0.1.0" and side["aspect"] == aspect
    assert side["gpu"]["checked"] is False  # the sidecar says the GPU check was skipped
    assert side["stress_weights"] is True and side["warning"].startswith("STRESS WEIGHTS")
    assert "WARNING: STRESS WEIGHTS" in out

    from da3_litert_farm.checks.fidelity import TFLiteModel

    assert TFLiteModel(model).output_shape == (1, 1, *shape)  # a real, loadable model


def test_pull_the_bundle_from_a_clone(app_clone, published, tmp_path):
    """One file for every aspect: sha256 as catalogued, a signature per aspect, each runs like its own file."""
    app, env = app_clone
    _, farm = published
    target = tmp_path / "assets"
    out = farm_cli("pull", "--allow-stress", "--allow-unsigned", "--repo", app, "--version", "0.1.0", "--bundle", "--out", target, env=env, cwd=tmp_path)
    assert "bundle small-112 of 16x9, 3x4, 9x16" in out and "WARNING: STRESS WEIGHTS" in out  # name order
    bundle = target / "da3-small-litert-small-112-bundle-fp16.tflite"
    side = json.loads((target / f"{bundle.name}.json").read_text())
    catalog = json.loads(farm.git("show", "catalog/v0.1.0:artifacts/catalog.json"))  # as published
    assert side["sha256"] == sha256_file(bundle) == catalog["bundles"][0]["sha256"]
    assert side["kind"] == "bundle" and side["stress_weights"] is True
    assert [(s["signature"], s["input"]["shape"]) for s in side["signatures"]] == [
        ("16x9", [1, 3, 70, 112]), ("3x4", [1, 3, 112, 84]), ("9x16", [1, 3, 112, 70])]
    assert all(s["input"]["preprocessing"]["std"] == [0.229, 0.224, 0.225] for s in side["signatures"])
    assert bundle.stat().st_size < 0.5 * sum(m["bytes"] for m in catalog["models"])  # weights stored once

    from da3_litert_farm.checks.fidelity import TFLiteModel
    from da3_litert_farm.model.photo_input import cover_and_center_crop, load_photo, normalize

    for m in catalog["models"]:  # each signature against its own file of the same version, pulled alone
        single = tmp_path / "single" / m["aspect"]
        farm_cli("pull", "--allow-stress", "--allow-unsigned", "--repo", app, "--version", "0.1.0", "--aspect", m["aspect"], "--out", single, env=env,
                 cwd=tmp_path)
        (path,) = single.glob("*.tflite")
        image = normalize(cover_and_center_crop(load_photo("coffee"), m["height"], m["width"]))
        assert (TFLiteModel(bundle, signature=m["aspect"])(image) == TFLiteModel(path)(image)).all()
    out = farm_cli("select", "--repo", app, "--version", "0.1.0", "--camera", "3024x4032", env=env, cwd=tmp_path)
    assert "in the bundle small-112: signature '3x4' of artifacts/bundles/small-112/model_fp16.tflite" in out


def test_pull_by_aspect_and_version(app_clone, tmp_path):
    app, env = app_clone
    farm_cli("pull", "--allow-stress", "--allow-unsigned", "--repo", app, "--version", "0.2.0", "--aspect", "16x9", "--out", tmp_path, env=env, cwd=tmp_path)
    assert (tmp_path / "da3-small-litert-small-112-16x9-56x112-fp16.tflite").is_file()


def test_pull_rejects_a_tampered_file_without_touching_the_target(published, tmp_path):
    root, farm = published
    app = root / "app-tamper"  # a fresh clone: nothing cached, the bytes come from the remote
    run("git", "clone", "-q", farm.root, app, cwd=root, env=farm.env)
    entry = next(m for m in farm.catalog()["models"] if m["aspect"] == "3x4")
    md5 = hashlib.md5((farm.root / entry["file"]).read_bytes()).hexdigest()
    stored = root / "da3-farm-remote" / "files" / "md5" / md5[:2] / md5[2:]
    original = stored.read_bytes()
    target = tmp_path / "assets"
    target.mkdir()
    (target / "keep.txt").write_text("existing app asset")
    before = listing(target)
    stored.chmod(0o644)
    stored.write_bytes(original[:-16] + bytes(16))
    try:
        out = farm_cli("pull", "--allow-stress", "--allow-unsigned", "--repo", app, "--version", "0.1.0", "--aspect", "3x4", "--out", target,
                       env=farm.env, cwd=tmp_path, ok=False)
    finally:
        stored.write_bytes(original)
    assert "sha256 mismatch" in out and "left untouched" in out
    assert listing(target) == before  # the staging folder inside it is gone too
    assert sorted(p.name for p in tmp_path.iterdir()) == ["assets"]


def test_pull_errors_leave_target_untouched(published, app_clone, tmp_path):
    root, farm = published
    app, env = app_clone
    target = tmp_path / "app" / "src" / "assets"  # none of it exists: a failed pull creates nothing
    out = farm_cli("pull", "--allow-stress", "--allow-unsigned", "--repo", app, "--version", "9.9.9", "--aspect", "9x16", "--out", target,
                   env=env, cwd=tmp_path, ok=False)
    assert "catalog version '9.9.9' is not published" in out and "published: 0.1.0, 0.2.0" in out
    out = farm_cli("pull", "--allow-stress", "--allow-unsigned", "--repo", app, "--version", "0.1.0", "--aspect", "1x1", "--out", target,
                   env=env, cwd=tmp_path, ok=False)
    assert "aspect '1x1' is not in catalog 0.1.0; available: ['16x9', '3x4', '9x16']" in out
    remote = root / "da3-farm-remote"
    fresh = root / "app-offline"
    run("git", "clone", "-q", farm.root, fresh, cwd=root, env=env)
    remote.rename(root / "remote-away")
    try:
        out = farm_cli("pull", "--allow-stress", "--allow-unsigned", "--repo", fresh, "--version", "0.1.0", "--aspect", "9x16", "--out", target,
                       env=env, cwd=tmp_path, ok=False)
    finally:
        (root / "remote-away").rename(remote)
    assert "cannot download artifacts/models/small/112/9x16/model_fp16.tflite" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_diff_and_versions(app_clone, tmp_path):
    app, env = app_clone
    assert farm_cli("versions", "--repo", app, env=env, cwd=tmp_path).split() == ["0.1.0", "0.2.0"]
    rows = json.loads(farm_cli("diff", "--repo", app, "0.1.0", "0.2.0", "--json", env=env, cwd=tmp_path))
    by = {r["cell"].removeprefix("small-112-"): r for r in rows}
    assert by["16x9"]["change"] == "changed" and by["16x9"]["shape"] == "70x112 -> 56x112"
    assert by["16x9"]["bytes_delta"] != 0
    assert by["9x16"]["change"] == "same" and by["9x16"]["bytes_delta"] == 0
    text = farm_cli("diff", "--repo", app, "0.1.0", "0.2.0", env=env, cwd=tmp_path)
    assert "catalog 0.1.0 -> 0.2.0" in text and "16x9" in text
    assert by["16x9"]["gpu_pearson_min"] is None and "pearson_min GPU FP16" in text and "not checked" in text


def test_select_explains_the_choice(app_clone, tmp_path):
    app, env = app_clone
    out = farm_cli("select", "--repo", app, "--version", "0.1.0", "--camera", "1080x2400", env=env, cwd=tmp_path)
    assert "camera 1080x2400" in out and "-> small-112-9x16" in out
    assert "WARNING: STRESS WEIGHTS: built from seeded random weights" in out
    help_text = farm_cli("--help", env=env, cwd=tmp_path)
    words = " ".join(help_text.split())
    assert "crops the least" in words and "Ties go to the model" in words
    assert "W x H is the frame as it is fed to the model, after rotation" in words
    assert "--camera WxH" in farm_cli("pull", "--help", env=env, cwd=tmp_path)
    # A sensor size passed unrotated: the pick, and what the portrait frame would get.
    out = farm_cli("select", "--repo", app, "--version", "0.1.0", "--camera", "4032x3024", env=env, cwd=tmp_path)
    assert "-> small-112-16x9" in out and "4032x3024 (landscape) gets small-112-16x9 (HxW 70x112); if your app " \
                                          "feeds the frame portrait, pass 3024x4032: it gets small-112-3x4 (HxW 112x84)" in out


def test_pull_refuses_a_stress_catalog_unless_allowed(app_clone, tmp_path):
    app, env = app_clone
    target = tmp_path / "assets"
    out = farm_cli("pull", "--allow-unsigned", "--repo", app, "--version", "0.1.0", "--aspect", "9x16", "--out", target,
                   env=env, cwd=tmp_path, ok=False)
    assert "catalog 0.1.0 was built from stress weights: its models compute noise, not depth; nothing was " \
           "downloaded" in out and "--allow-stress" in out
    assert list(tmp_path.iterdir()) == []


def test_pull_places_model_and_sidecar_so_no_reader_pairs_them_wrongly(tmp_path, monkeypatch):
    """Kill `place` after each of its steps: a sidecar on disk always describes the model beside it."""
    from da3_litert_farm.client import staging

    def pair(directory, payload):
        directory.mkdir()
        model = directory / "m.tflite"
        model.write_bytes(payload)
        (directory / "m.tflite.json").write_text(json.dumps({"sha256": sha256_file(model)}))
        return model, directory / "m.tflite.json"

    def consistent(out):
        side = out / "m.tflite.json"
        return not side.exists() or json.loads(side.read_text())["sha256"] == sha256_file(out / "m.tflite")

    for stop_after in range(3):  # the old sidecar's removal, the model's rename, the sidecar's rename
        out = tmp_path / f"out{stop_after}"
        pair(out, b"old model")
        new = pair(tmp_path / f"new{stop_after}", b"new model")
        done = []

        def interrupting(real):
            def step(*args):
                if len(done) == stop_after:
                    raise KeyboardInterrupt  # the build is killed here
                done.append(real(*args))
            return step

        monkeypatch.setattr(staging.os, "remove", interrupting(os.remove))
        monkeypatch.setattr(staging.os, "replace", interrupting(os.replace))
        with pytest.raises(KeyboardInterrupt):
            staging.place(*new, out)
        monkeypatch.undo()
        assert consistent(out), f"killed after {stop_after} steps: a sidecar beside another model"
    out = tmp_path / "done"
    pair(out, b"old model")
    staging.place(*pair(tmp_path / "new", b"new model"), out)
    assert (out / "m.tflite").read_bytes() == b"new model" and consistent(out)


def _tags(repo, version):
    out = subprocess.run(["git", "ls-remote", "--tags", "--refs", str(repo)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[1]: line.split()[0] for line in out.splitlines() if line.endswith(f"@v{version}")
            or line.endswith(f"catalog/v{version}")}


def test_publish_is_all_or_nothing_at_each_failure_point(published):
    """Files fail to push; one tag cannot be made; origin refuses the tags. Each rerun finishes the job."""
    root, farm = published
    origin = root / "origin.git"
    run("git", "init", "-q", "--bare", origin, cwd=root, env=farm.env)
    farm.git("remote", "add", "origin", str(origin))
    doc = farm.params
    doc["catalog"]["version"] = "0.3.0"
    farm.set_params(doc)
    assert farm.repro()[0] == {"params", "catalog", "report"}
    farm.git("add", "-A")
    farm.git("commit", "-qm", "catalog 0.3.0")
    publish = [sys.executable, "-m", "da3_litert_farm.ops.publish", *ALLOW]
    expected = {"refs/tags/catalog/v0.3.0", "refs/tags/da3-small-litert-small-112-bundle@v0.3.0"} | {
        f"refs/tags/da3-small-litert-small-112-{a}@v0.3.0" for a in TINY}

    # 1. The DVC remote cannot be written: nothing is tagged anywhere.
    (root / "blocker").write_text("a file where the remote's folder should be")
    run(sys.executable, "-m", "dvc", "remote", "modify", "--local", "storage", "url", root / "blocker" / "remote",
        cwd=farm.root, env=farm.env)
    out = run(*publish, cwd=farm.root, env=farm.env, ok=False)
    assert f"dvc push to the DVC remote 'storage' ({root / 'blocker' / 'remote'}) failed, nothing was tagged" in out
    assert _tags(farm.root, "0.3.0") == {} and _tags(origin, "0.3.0") == {}
    head = farm.git("rev-parse", "HEAD")  # the artifacts commit, made before pushing
    (farm.root / ".dvc" / "config.local").unlink()

    # 2. One tag cannot be created (a ref is in its way): none of the tags is made.
    blocked = "refs/tags/da3-small-litert-small-112-3x4@v0.3.0"
    farm.git("update-ref", f"{blocked}/x", "HEAD")
    out = run(*publish, cwd=farm.root, env=farm.env, ok=False)
    assert "update-ref" in out and "da3-small-litert-small-112-3x4@v0.3.0" in out
    assert _tags(farm.root, "0.3.0") == {} and _tags(origin, "0.3.0") == {}
    farm.git("update-ref", "-d", f"{blocked}/x")

    # 3. Origin refuses the tags: it gets none of them; a client of origin sees no 0.3.0.
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'tags are frozen today' >&2\nexit 1\n")
    hook.chmod(0o755)
    out = run(*publish, cwd=farm.root, env=farm.env, ok=False)
    assert "pushing the tags to origin failed, and origin got none of them" in out and "tags are frozen" in out
    made = _tags(farm.root, "0.3.0")
    assert set(made) == expected and _tags(origin, "0.3.0") == {}
    assert "0.3.0" not in farm_cli("versions", "--repo", origin, env=farm.env, cwd=root)

    # The rerun pushes what was made, changing nothing; so does one more.
    hook.unlink()
    for _ in range(2):
        out = run(*publish, cwd=farm.root, env=farm.env)
        assert "re-pushed da3-small-litert 0.3.0" in out and "tags pushed to origin" in out
        assert _tags(farm.root, "0.3.0") == made and _tags(origin, "0.3.0") == made
    assert farm.git("rev-parse", "HEAD") == head
    assert farm_cli("versions", "--repo", origin, env=farm.env, cwd=root).split()[-1] == "0.3.0"


def _oldest_python() -> str:
    """The oldest CPython >= 3.9 on this machine (pyenv's included): the client's floor."""
    found = {}
    for candidate in [*(f"python3.{m}" for m in range(9, 14)),
                      *sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3"))]:
        proc = subprocess.run([str(candidate), "-c", "import sys, venv; print(*sys.version_info[:2])"],
                              capture_output=True, text=True) if shutil.which(str(candidate)) else None
        if proc and proc.returncode == 0:
            version = tuple(int(v) for v in proc.stdout.split())
            if version >= (3, 9):
                found.setdefault(version, str(candidate))
    return found[min(found)] if found else sys.executable


@dataclass
class Client:
    """A fresh venv with the client installed from the repository's files, as an app build makes one."""
    venv: Path
    source: Path
    env: dict

    def pip_install(self, *specs: str) -> None:
        run(self.venv / "bin" / "python", "-m", "pip", "install", "--quiet", *specs, cwd=self.venv, env=self.env)

    def farm(self, *args, env: dict | None = None, ok=True, echo=False) -> str:
        out = run(self.venv / "bin" / "farm", *args, cwd=self.venv.parent, env={**self.env, **(env or {})}, ok=ok)
        if echo:  # what an app build's log shows (pytest -s)
            print(f"\n$ farm {' '.join(map(str, args[:1]))} ... {' '.join(map(str, args[-2:]))}\n{out.strip()}")
        return out


def new_client(workdir: Path, env: dict, python: str, extra: str = "") -> Client:
    source = workdir / "farm-src"  # what `pip install git+<repo>` builds from: the repo's files
    if not source.exists():
        for f in repo_files():
            (source / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, source / f)
    venv = workdir / f"client-venv{extra.replace('[', '-').rstrip(']')}"
    run(python, "-m", "venv", venv, cwd=workdir, env=env)
    env = {k: v for k, v in env.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    client = Client(venv, source, env)
    client.pip_install(f"{source}{extra}")  # with its extra in one go (docs/publishing.md says why)
    return client


@pytest.fixture(scope="module")
def plain_client(published, module_dir) -> Client:
    """The client alone (no extra), on the oldest Python here."""
    return new_client(module_dir("client"), published[1].env, _oldest_python())


def test_the_client_alone_pulls_in_a_fresh_venv(published, plain_client, tmp_path):
    """`pip install <farm repo>` gives the client: no torch, no converter, no JAX, on the oldest Python here."""
    root, farm = published
    venv, env = plain_client.venv, plain_client.env
    installed = run(venv / "bin" / "python", "-m", "pip", "list", "--format=freeze", cwd=tmp_path, env=env).lower()
    for heavy in ("torch", "litert-torch", "ai-edge-litert", "ai-edge-quantizer", "jax", "jaxlib", "dvc-s3", "dvc-ssh"):
        assert f"\n{heavy}==" not in f"\n{installed}", f"{heavy} came with the client"
    site = next((venv / "lib").glob("python3.*/site-packages"))
    assert (site / "da3_litert_farm").is_dir() and not (site / "stages").exists()

    target = tmp_path / "app" / "assets"
    out = run(venv / "bin" / "farm", "pull", "--allow-stress", "--allow-unsigned", "--repo", farm.root, "--version", "0.1.0", "--camera", "1080x1920",
              "--out", target, cwd=tmp_path, env=env)
    assert "-> small-112-9x16" in out and "WARNING: STRESS WEIGHTS" in out
    model = target / "da3-small-litert-small-112-9x16-112x70-fp16.tflite"
    expected = next(m["sha256"] for m in json.loads(farm.git("show", "catalog/v0.1.0:artifacts/catalog.json"))["models"]
                    if m["aspect"] == "9x16")
    assert sha256_file(model) == expected == json.loads((target / f"{model.name}.json").read_text())["sha256"]
    assert "python 3." in run(venv / "bin" / "python", "-c", "import sys; print('python', sys.version)",
                              cwd=tmp_path, env=env).lower()


# ---- real remotes: an S3-compatible server and an SSH server on 127.0.0.1, started by these tests ----

@dataclass
class Remotes:
    farm: Farm
    s3: S3
    ssh: SSH
    published: dict[str, str]  # version -> what publish printed


@pytest.fixture(scope="module")
def remotes(published, module_dir):
    """The published farm, cloned (its DVC cache shared), its committed remote pointed at a real S3 server for
    0.5.0-rc.2 and 0.5.0-rc.10, then at a real SSH server for 0.5.0. Beside the default, .dvc/config also names
    remotes that fail the ways an app build can meet (`farm pull --remote NAME`)."""
    _, origin = published
    work = module_dir("remotes")
    with s3_server(work) as s3, ssh_server(work) as ssh, silent_server() as silent:
        farm = Farm(work / "farm")
        run("git", "clone", "-q", origin.root, farm.root, cwd=work, env=origin.env)
        farm.git("remote", "remove", "origin")  # publish pushes tags to origin: keep them here
        farm.git("config", "user.email", "t@t")
        farm.git("config", "user.name", "t")
        farm.env.update(s3.credentials(), HOME=str(ssh.home))  # where DVC finds credentials, never the repo
        farm.dvc("config", "--local", "cache.dir", str(origin.root / ".dvc" / "cache"))
        farm.dvc("config", "--local", "cache.type", "hardlink,symlink")
        farm.dvc("checkout", "-q")

        def remote(*args: str) -> str:
            return farm.run("-m", "da3_litert_farm.ops.remote", *args)

        for name, url, endpoint in (
                ("no-bucket", "s3://no-such-bucket/da3", s3.endpoint),
                ("hung-s3", f"s3://{s3.bucket}/da3", f"http://127.0.0.1:{silent}"),
                ("hung-ssh", f"ssh://{ssh.user}@127.0.0.1:{silent}/srv/da3", None),
                ("closed-ssh", f"ssh://{ssh.user}@127.0.0.1:{free_port()}/srv/da3", None)):
            farm.dvc("remote", "add", name, url)
            if endpoint:
                farm.dvc("remote", "modify", name, "endpointurl", endpoint)

        def release(version: str) -> str:
            doc = farm.params
            doc["catalog"]["version"] = version
            farm.set_params(doc)
            farm.repro()
            farm.commit(f"catalog {version}")
            return farm.run("-m", "da3_litert_farm.ops.publish", *ALLOW)

        shown = remote(f"s3://{s3.bucket}/da3", "--endpoint", s3.endpoint)
        assert f"remote 'storage' (.dvc/config): s3://{s3.bucket}/da3, endpoint {s3.endpoint}" in shown
        out = {v: release(v) for v in ("0.5.0-rc.2", "0.5.0-rc.10")}
        remote(ssh.url(work / "ssh-remote"))
        out["0.5.0"] = release("0.5.0")
        yield Remotes(farm, s3, ssh, out)


def catalog_at(farm: Farm, version: str) -> dict:
    return json.loads(farm.git("show", f"catalog/v{version}:artifacts/catalog.json"))


def test_publish_takes_prereleases_in_semver_order(remotes, tmp_path):
    assert "published da3-small-litert 0.5.0-rc.10 as catalog/v0.5.0-rc.10" in remotes.published["0.5.0-rc.10"]
    assert "only this machine can pull" not in remotes.published["0.5.0"]  # S3 and SSH are shared remotes
    versions = farm_cli("versions", "--repo", remotes.farm.root, env=remotes.farm.env, cwd=tmp_path).split()
    assert versions[-3:] == ["0.5.0-rc.2", "0.5.0-rc.10", "0.5.0"]


def test_the_remote_is_committed_and_holds_no_credential(remotes):
    farm = remotes.farm
    config = farm.git("show", "catalog/v0.5.0-rc.10:.dvc/config")
    assert f"url = s3://{remotes.s3.bucket}/da3" in config and f"endpointurl = {remotes.s3.endpoint}" in config
    assert "url = ssh://" in farm.git("show", "catalog/v0.5.0:.dvc/config")
    for secret in (remotes.s3.secret, remotes.s3.key_id):
        proc = subprocess.run(["git", "grep", "-q", secret, *farm.git("tag").split()], cwd=farm.root)
        assert proc.returncode == 1, "a credential reached the repository"  # 1: no match anywhere


def test_a_fresh_client_pulls_from_s3_with_the_s3_extra(remotes, plain_client, published, tmp_path):
    target = tmp_path / "app" / "assets"
    pull = ("pull", "--allow-stress", "--allow-unsigned", "--repo", str(remotes.farm.root), "--version", "0.5.0-rc.10", "--out", str(target))
    creds = {**remotes.s3.credentials(), "HOME": str(tmp_path)}
    out = plain_client.farm(*pull, "--camera", "1080x1920", env=creds, ok=False, echo=True)
    assert "needs DVC's s3 plugin, which this install lacks: pip install \"da3-litert-farm[s3]\"" in out
    assert not (tmp_path / "app").exists()

    client = new_client(tmp_path, published[1].env, sys.executable, "[s3]")  # as the message says, in one go
    started = time.monotonic()
    out = client.farm(*pull, "--camera", "1080x1920", env=creds)
    print(f"\nfarm pull from the S3 server: {time.monotonic() - started:.1f} s")  # a figure for the record (-s)
    assert "-> small-112-9x16" in out
    (model,) = target.glob("*.tflite")
    catalogued = {m["aspect"]: m["sha256"] for m in catalog_at(remotes.farm, "0.5.0-rc.10")["models"]}
    assert sha256_file(model) == catalogued["9x16"]
    sidecar = (target / f"{model.name}.json").read_text()
    assert remotes.s3.secret not in sidecar and remotes.s3.key_id not in sidecar
    assert sorted(p.name for p in target.iterdir()) == sorted([model.name, f"{model.name}.json"])  # no staging left

    elsewhere = tmp_path / "elsewhere" / "assets"
    failing = ("pull", "--allow-stress", "--allow-unsigned", "--repo", str(remotes.farm.root), "--version", "0.5.0-rc.10", "--aspect",
               "3x4", "--out", str(elsewhere))
    out = client.farm(*failing, env={**creds, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}, ok=False, echo=True)
    assert "remote 'storage'" in out and "refused the credentials (PermissionError: Forbidden)" in out
    no_creds = {k: v for k, v in creds.items() if not k.startswith("AWS_")}
    assert "no credentials for the DVC remote 'storage'" in client.farm(*failing, env=no_creds, ok=False, echo=True)
    out = client.farm(*failing, "--remote", "no-bucket", env=creds, ok=False, echo=True)
    assert "names bucket 'no-such-bucket', which does not exist on that endpoint" in out
    started = time.monotonic()
    out = client.farm(*failing, "--remote", "hung-s3", env=creds, ok=False, echo=True)
    assert "no answer from the DVC remote 'hung-s3'" in out and f"in {ANSWER_TIMEOUT_S} s" in out
    assert time.monotonic() - started < ANSWER_TIMEOUT_S + 30  # bounded, whatever the plugin's retries
    assert not (tmp_path / "elsewhere").exists()


def test_a_fresh_client_with_the_ssh_extra_pulls_over_ssh(remotes, published, tmp_path):
    client = new_client(tmp_path, published[1].env, sys.executable, "[ssh]")
    target = tmp_path / "app" / "assets"
    pull = ("pull", "--allow-stress", "--allow-unsigned", "--repo", str(remotes.farm.root), "--version", "0.5.0", "--aspect", "3x4",
            "--out", str(target))
    started = time.monotonic()
    out = client.farm(*pull, env={"HOME": str(remotes.ssh.home)})  # the key in ~/.ssh, as on a build machine
    print(f"\nfarm pull from the SSH server: {time.monotonic() - started:.1f} s")  # a figure for the record (-s)
    assert "aspect 3x4 requested" in out
    (model,) = target.glob("*.tflite")
    assert sha256_file(model) == {m["aspect"]: m["sha256"] for m in catalog_at(remotes.farm, "0.5.0")["models"]}["3x4"]

    elsewhere = tmp_path / "elsewhere"
    failing = (*pull[:-1], str(elsewhere))
    keyless = tmp_path / "keyless-home"
    (keyless / ".ssh").mkdir(parents=True)
    shutil.copy(remotes.ssh.home / ".ssh" / "known_hosts", keyless / ".ssh")
    out = client.farm(*failing, env={"HOME": str(keyless)}, ok=False, echo=True)
    assert "the DVC remote 'storage' (ssh://" in out and "refused the credentials (PermissionError: Permission denied" in out
    started = time.monotonic()
    out = client.farm(*failing, "--remote", "hung-ssh", env={"HOME": str(remotes.ssh.home)}, ok=False, echo=True)
    assert "no answer from the DVC remote 'hung-ssh'" in out and f"within {CONNECT_TIMEOUT_S} s" in out
    assert time.monotonic() - started < CONNECT_TIMEOUT_S + 30
    out = client.farm(*failing, "--remote", "closed-ssh", env={"HOME": str(remotes.ssh.home)}, ok=False, echo=True)
    assert "cannot reach the DVC remote 'closed-ssh'" in out and "ConnectionRefusedError" in out
    assert not elsewhere.exists()


def test_show_lists_what_a_published_version_holds(remotes, tmp_path):
    farm = remotes.farm
    catalog = catalog_at(farm, "0.5.0")
    text = farm_cli("show", "--repo", farm.root, "--version", "0.5.0", env=farm.env, cwd=tmp_path)
    assert text.startswith("da3-small-litert 0.5.0 (created ")
    assert "weights of small (da3-small): stress: seeded random weights (seed 0)" in text
    assert "WARNING: STRESS WEIGHTS" in text
    for m in catalog["models"]:
        row = next(line for line in text.splitlines() if line.split()[:3] == [m["model"], str(m["tier"]), m["aspect"]])
        assert f"{m['height']}x{m['width']}" in row and m["sha256"][:12] in row and f"{m['bytes'] / 1e6:.2f}" in row
        assert f"{1 - m['fidelity']['pearson_min']:.1e}" in row and "not checked" in row  # this farm skips the GPU
    assert catalog["bundles"][0]["sha256"][:12] in text and "litert-torch " + catalog["tools"]["litert-torch"] in text
    shown = json.loads(farm_cli("show", "--repo", farm.root, "--version", "0.5.0", "--json", env=farm.env,
                                cwd=tmp_path))
    assert [(r["cell"], r["sha256"]) for r in shown["models"]] == [(m["cell"], m["sha256"]) for m in catalog["models"]]
    assert shown["weights"]["small"]["kind"] == "stress" and shown["tools"] == catalog["tools"]


# ---- the README's recipes, line by line as printed ----

def sh(line: str, cwd: Path, env: dict) -> str:
    proc = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"$ {line}\n{proc.stdout}{proc.stderr}"[-6000:]
    return proc.stdout + proc.stderr


def test_the_readmes_publish_and_app_recipes_run_as_printed(published, module_dir):
    """A clone of a built farm follows README's Publish section to a real S3 server, then an app build follows
    its first section from a fresh venv. What the test supplies: the placeholders (bucket, endpoint, repository,
    version), the version bump the README asks for in a comment, `ARGS` in the environment (stress weights and a
    skipped GPU check need their flags) and `--allow-stress` on `farm pull`, for the same reason; FARM_SIGNING_KEY, so
    that `make keys` writes a throwaway key pair, whose public half the app keeps as `publisher.pub`."""
    _, origin = published
    work = module_dir("readme")
    version = "0.9.0"
    with s3_server(work) as s3:
        farm = Farm(work / "farm")
        run("git", "clone", "-q", origin.root, farm.root, cwd=work, env=origin.env)
        farm.git("remote", "remove", "origin")
        farm.git("config", "user.email", "t@t")
        farm.git("config", "user.name", "t")
        farm.dvc("config", "--local", "cache.dir", str(origin.root / ".dvc" / "cache"))
        farm.dvc("checkout", "-q")
        # The venv `make` made once, untouched since (its stamp newer than pyproject.toml and the Makefile).
        (farm.root / ".venv").symlink_to(Path(sys.executable).parents[1])
        for made_before in ("pyproject.toml", "Makefile"):
            os.utime(farm.root / made_before, (1e9, 1e9))
        env = {**farm.env, **s3.credentials(), "ARGS": " ".join(CHECKS),
               "FARM_SIGNING_KEY": str(work / "publisher" / "publisher.pem")}

        for line in readme_block("**Publish**"):
            if line.lstrip().startswith("#"):
                if "bump catalog.version" in line:
                    doc = farm.params
                    doc["catalog"]["version"] = version
                    farm.set_params(doc)
                continue
            line = re.sub(r"\s+#.*$", "", line)
            line = line.replace("s3://BUCKET/da3-farm", f"s3://{s3.bucket}/readme")
            line = line.replace("[ENDPOINT=https://...]", f"ENDPOINT={s3.endpoint}")
            out = sh(line, farm.root, env)
        assert f"published da3-small-litert {version} as catalog/v{version}" in out and "; signed by key " in out
        assert farm.git("status", "--porcelain") == ""
        assert f"url = s3://{s3.bucket}/readme" in farm.git("show", f"catalog/v{version}:.dvc/config")

        app = work / "app-build"
        app.mkdir()
        shutil.copy(work / "publisher" / "publisher.pub", app / "publisher.pub")  # what the publisher hands out
        venv = app / "venv"
        run(sys.executable, "-m", "venv", venv, cwd=app, env=env)
        app_env = {**{k: v for k, v in env.items() if k != "VIRTUAL_ENV"}, "HOME": str(app),
                   "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        outputs = []
        for line in readme_block("## Use a model in an app"):
            # file://localhost/PATH: the pip a fresh venv bundles (23.2) refuses a URL without a host (file:///PATH).
            line = re.sub(r"\s+#.*$", "", line).replace("git+<farm repo url>", f"git+file://localhost{farm.root}")
            line = re.sub(r"--repo R\b", f"--repo {farm.root}", line).replace("0.1.0", version)
            if line.startswith("farm pull"):
                line += " --allow-stress"
            outputs.append(sh(line, app, app_env))
        assert "torch" not in run(venv / "bin" / "python", "-m", "pip", "list", cwd=app, env=app_env).lower()
        catalog = catalog_at(farm, version)
        shipped = {m["aspect"]: m["sha256"] for m in catalog["models"]}
        assets = app / "app" / "src" / "main" / "assets" / "depth"
        by_name = {p.name: sha256_file(p) for p in assets.glob("*.tflite")}
        assert sorted(by_name.values()) == sorted([shipped["3x4"], catalog["bundles"][0]["sha256"]])
        assert any(version in o for o in outputs) and any("-> small-112-3x4" in o for o in outputs)
        # Three pulls: the camera's file, the same with --soc (this farm built no NPU files: the GPU file, said so), the
        # bundle.
        assert sum(f"signature: verified, catalog/v{version} signed by key" in o for o in outputs) == 3
        assert any("no NPU file for SM8650 in cell small-112-3x4 (compiled for: none): the GPU file" in o
                   for o in outputs)
        assert any("verified 2 files and their sidecars" in o for o in outputs)  # farm verify, as printed
        for sidecar in assets.glob("*.json"):
            assert json.loads(sidecar.read_text())["license"] == catalog["sources"]["small"]["license"]


def test_a_repository_that_never_published_says_how_to(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path / "fresh")], check=True)
    out = farm_cli("show", "--repo", tmp_path / "fresh", "--version", "0.1.0", env=os.environ, cwd=tmp_path, ok=False)
    assert "catalog version '0.1.0' is not published" in out and "published: none" in out
    assert "`make publish` after `make farm`" in out


# ---- trust: signed releases through both servers, a fresh client that pins the key, an attacker without it ----

@dataclass
class Signed:
    farm: Farm
    publisher: Path  # the throwaway publisher's public key, as an app keeps it
    publisher_key: Path
    attacker_key: Path  # another key: the attacker's own
    ssh_remote: Path  # the SSH remote's folder (the SSH server runs on this machine)
    client: Client  # the light client with the verify extra and both plugins
    published: dict[str, str]


@pytest.fixture(scope="module")
def signed(remotes, module_dir):
    """The `remotes` farm publishes 0.6.0 to the S3 server and 0.7.0 to the SSH server, signed with a throwaway
    key (FARM_SIGNING_KEY); each release re-runs only the catalog and report stages."""
    from da3_litert_farm.ops.signing import make_keys

    work = module_dir("signed")
    publisher_key, attacker_key = work / "publisher" / "publisher.pem", work / "attacker" / "attacker.pem"
    publisher = make_keys(publisher_key)
    make_keys(attacker_key)
    farm, ssh_remote = remotes.farm, work / "ssh-remote"
    env = {**farm.env, "FARM_SIGNING_KEY": str(publisher_key)}

    def release(version: str, *remote_args: str) -> str:
        farm.run("-m", "da3_litert_farm.ops.remote", *remote_args)
        doc = farm.params
        doc["catalog"]["version"] = version
        farm.set_params(doc)
        farm.repro()
        farm.commit(f"catalog {version}")
        return run(sys.executable, "-m", "da3_litert_farm.ops.publish", *CHECKS, cwd=farm.root, env=env)

    published = {"0.6.0": release("0.6.0", f"s3://{remotes.s3.bucket}/signed", "--endpoint", remotes.s3.endpoint),
                 "0.7.0": release("0.7.0", remotes.ssh.url(ssh_remote))}
    client = new_client(work, farm.env, sys.executable, "[verify,s3,ssh]")
    return Signed(farm, publisher, publisher_key, attacker_key, ssh_remote, client, published)


def test_a_signed_release_records_its_key_and_signature_and_no_secret(signed):
    farm, fp = signed.farm, signing_key(signed.publisher_key)[1]
    assert f"; signed by key {fp[:16]} ({signed.publisher_key})" in signed.published["0.6.0"]
    for version in ("0.6.0", "0.7.0"):
        message = farm.git("tag", "-l", "--format=%(contents)", f"catalog/v{version}")
        sig = subprocess.run(["git", "show", f"catalog/v{version}:artifacts/release/signature.sig"], cwd=farm.root,
                             capture_output=True, check=True).stdout
        assert (f"signed by key {fp} (sha256 of its public key PEM); artifacts/release/signature.sig sha256 "
                f"{hashlib.sha256(sig).hexdigest()}") in message
        statement = json.loads(farm.git("show", f"catalog/v{version}:artifacts/release/provenance.json"))
        catalog = catalog_at(farm, version)
        assert {s["digest"]["sha256"] for s in statement["subject"]} == {
            m["sha256"] for m in catalog["models"] + [catalog["bundles"][0]]}
        deps = {d["name"]: d for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]}
        assert deps["checkpoint small"]["digest"]["sha256"] == catalog["sources"]["small"]["checkpoint"]["weights_sha256"]
        commit = deps["code"]["digest"]["gitCommit"]  # the commit the catalog was built and committed at
        assert farm.git("show", f"{commit}:artifacts/catalog.json") == farm.git(
            "show", f"catalog/v{version}:artifacts/catalog.json")
    proc = subprocess.run(["git", "grep", "-q", "PRIVATE KEY", *farm.git("tag").split()], cwd=farm.root)
    assert proc.returncode == 1, "a private key reached the repository"


def test_a_fresh_client_pulls_signed_releases_verified_from_s3_and_ssh(signed, tmp_path):
    farm, client, fp = signed.farm, signed.client, signing_key(signed.publisher_key)[1]
    pull = ("pull", "--allow-stress", "--repo", str(farm.root), "--version", "0.6.0", "--camera", "1080x1920")
    target = tmp_path / "app" / "assets"
    started = time.monotonic()
    out = client.farm(*pull, "--trust", str(signed.publisher), "--out", str(target))
    verified_s = time.monotonic() - started
    assert f"signature: verified, catalog/v0.6.0 signed by key {fp[:16]}" in out
    model = target / "da3-small-litert-small-112-9x16-112x70-fp16.tflite"
    catalog = catalog_at(farm, "0.6.0")
    expected = next(m["sha256"] for m in catalog["models"] if m["aspect"] == "9x16")
    assert sha256_file(model) == expected
    sig = subprocess.run(["git", "show", "catalog/v0.6.0:artifacts/release/signature.sig"], cwd=farm.root,
                         capture_output=True, check=True).stdout
    side = json.loads((target / f"{model.name}.json").read_text())
    assert side["signature"] == {"verified": True, "release": "catalog/v0.6.0", "key": fp,
                                 "signature_sha256": hashlib.sha256(sig).hexdigest(),
                                 "release_folder": "da3-small-litert-0.6.0.release"}
    folder = target / "da3-small-litert-0.6.0.release"
    assert sorted(p.name for p in folder.iterdir()) == ["catalog.json", "provenance.json", "signature.sig"]
    assert json.loads((folder / "catalog.json").read_text()) == catalog

    unverified = tmp_path / "unverified"
    started = time.monotonic()
    out = client.farm(*pull, "--allow-unsigned", "--out", str(unverified))
    plain_s = time.monotonic() - started
    assert "signature: NOT verified: signed, but not verified: no --trust key given (--allow-unsigned)" in out
    assert json.loads((unverified / f"{model.name}.json").read_text())["signature"]["verified"] is False
    assert not list(unverified.glob("*.release"))
    print(f"\nfarm pull from the S3 server: verified (--trust) {verified_s:.1f} s, unverified (--allow-unsigned) "
          f"{plain_s:.1f} s")  # figures for the record (-s)

    over_ssh = tmp_path / "ssh" / "assets"  # the key from the environment, as a Gradle or Xcode step sets it
    started = time.monotonic()
    out = client.farm("pull", "--allow-stress", "--repo", str(farm.root), "--version", "0.7.0", "--aspect", "3x4",
                      "--out", str(over_ssh), env={"FARM_TRUST": str(signed.publisher)})
    print(f"\nfarm pull from the SSH server, verified (FARM_TRUST): {time.monotonic() - started:.1f} s")
    assert "signature: verified, catalog/v0.7.0" in out
    (pulled,) = over_ssh.glob("*.tflite")
    assert sha256_file(pulled) == next(m["sha256"] for m in catalog_at(farm, "0.7.0")["models"] if m["aspect"] == "3x4")

    # farm verify, offline, on the assets as the app build left them; then one flipped byte in each.
    started = time.monotonic()
    out = client.farm("verify", str(target), "--trust", str(signed.publisher))
    print(f"\nfarm verify on the assets: {time.monotonic() - started:.1f} s")
    assert f"verified 1 file and their sidecars in {target} against catalog 0.6.0, signed by key {fp[:16]}" in out
    original = model.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x01
    model.write_bytes(bytes(flipped))
    out = client.farm("verify", str(target), "--trust", str(signed.publisher), ok=False, echo=True)
    assert (f"farm verify: {model.name}: sha256 {sha256_file(model)} is not the signed catalog 0.6.0's {expected}: "
            "the file was changed after signing") in out
    model.write_bytes(original)
    sidecar = target / f"{model.name}.json"
    text = sidecar.read_bytes()
    at = re.search(rb'"shape": \[\s*(1)', text).start(1)  # the input shape's batch size, the first shape there
    sidecar.write_bytes(text[:at] + bytes([text[at] ^ 0x03]) + text[at + 1:])  # "1" -> "2"
    out = client.farm("verify", str(target), "--trust", str(signed.publisher), ok=False, echo=True)
    assert f"farm verify: {sidecar.name}: field input.shape.0 differs from the signed catalog 0.6.0" in out
    sidecar.write_bytes(text)
    assert "verified 1 file" in client.farm("verify", str(target), env={"FARM_TRUST": str(signed.publisher)})


def test_an_attacker_with_git_push_and_remote_write_but_not_the_key_is_refused(signed, tmp_path):
    """They push tags whose catalog names their own file, with its correct sha256 (and that file to the SSH
    remote): signed with their key, unsigned, with the publisher's signature copied in or cut out, an old signed
    release under a new tag. Every pull that pins the publisher's key is refused, and writes nothing."""
    from da3_litert_farm.ops.signing import provenance, sign_release

    farm, client = signed.farm, signed.client
    ours, theirs = signing_key(signed.publisher_key)[1], signing_key(signed.attacker_key)[1]
    attacker = tmp_path / "attacker"
    run("git", "clone", "-q", farm.root, attacker, cwd=tmp_path, env=farm.env)

    def git(*args: str) -> str:
        return run("git", "-c", "user.email=x@x", "-c", "user.name=x", *args, cwd=attacker, env=farm.env)

    payload = b"their model " + os.urandom(4096)
    md5 = hashlib.md5(payload).hexdigest()
    stored = signed.ssh_remote / "files" / "md5" / md5[:2] / md5[2:]
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(payload)  # remote write

    def forge(version: str, key: Path | None = None, keep_release: bool = False, cut_signature: bool = False,
              message: str | None = None) -> None:
        git("checkout", "-q", "catalog/v0.7.0")  # the SSH release: its remote, its signed release folder
        catalog = json.loads((attacker / "artifacts" / "catalog.json").read_text())
        entry = next(m for m in catalog["models"] if m["aspect"] == "9x16")
        catalog["version"] = version
        entry.update(sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload))
        (attacker / "artifacts" / "catalog.json").write_text(json.dumps(catalog, indent=2) + "\n")
        lock = yaml.safe_load((attacker / "dvc.lock").read_text())
        for stage in lock["stages"].values():
            for out in stage.get("outs", []):
                if out["path"] == entry["file"]:
                    out.update(md5=md5, size=len(payload))
        (attacker / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
        release_dir = attacker / "artifacts" / "release"
        if key is not None:
            sign_release((attacker / "artifacts" / "catalog.json").read_bytes(), provenance(catalog, "0" * 40, {}),
                         key, release_dir)
        elif not keep_release:
            shutil.rmtree(release_dir)
        if cut_signature:
            (release_dir / "signature.sig").unlink()
        git("add", "-A")
        git("commit", "-qm", f"catalog {version}")
        git("tag", "-a", f"catalog/v{version}", "-m", message or f"da3-small-litert {version}")
        git("push", "-q", "origin", f"catalog/v{version}")  # git push

    def pull(version: str, *trust: str, ok: bool = False, aspect: str = "9x16", repo: Path = farm.root
             ) -> tuple[str, Path]:
        target = tmp_path / f"app-{version}-{len(trust)}-{aspect}" / "assets"
        out = client.farm("pull", "--allow-stress", "--repo", str(repo), "--version", version, "--aspect", aspect,
                          "--out", str(target), *trust, ok=ok, echo=not ok)
        assert ok or not target.parent.exists(), f"{version}: a refused pull wrote {target.parent}"
        return out, target

    pin = ("--trust", str(signed.publisher))
    forge("0.8.0", key=signed.attacker_key)
    out, _ = pull("0.8.0", *pin)
    assert (f"catalog 0.8.0 is signed by an unknown key {theirs[:16]} (fingerprint {theirs}); trusted: {ours[:16]}: "
            "not signed by a publisher this build trusts") in out

    forge("0.8.1")
    out, _ = pull("0.8.1", *pin)
    assert ("catalog 0.8.1 is unsigned (no artifacts/release/signature.sig at catalog/v0.8.1): its publisher did not "
            "sign it, or someone without the key published it; pass --allow-unsigned") in out
    out, taken = pull("0.8.1", "--allow-unsigned", ok=True)  # what pinning stops: unpinned, the attack lands
    assert (taken / "da3-small-litert-small-112-9x16-112x70-fp16.tflite").read_bytes() == payload
    assert "signature: NOT verified: the release is unsigned (--allow-unsigned)" in out

    forge("0.8.2", keep_release=True)  # the publisher's 0.7.0 signature and provenance, copied in
    out, _ = pull("0.8.2", *pin)
    assert (f"catalog 0.8.2: the signature of key {ours[:16]} does not cover what catalog/v0.8.2 holds (catalog.json: "
            "signed sha256") in out and "the catalog or provenance was changed after signing" in out

    forge("0.8.3", keep_release=True, cut_signature=True,
          message=f"da3-small-litert 0.8.3\n\nsigned by key {ours} (sha256 of its public key PEM)")
    out, _ = pull("0.8.3", *pin)
    assert (f"the tag catalog/v0.8.3 says it was signed by key {ours[:16]}, but it holds no "
            "artifacts/release/signature.sig: the signature was removed after publishing") in out

    git("tag", "-a", "catalog/v0.8.4", "catalog/v0.6.0^{commit}", "-m", "0.8.4")  # an old signed release, new tag
    git("push", "-q", "origin", "catalog/v0.8.4")
    out, _ = pull("0.8.4", *pin)
    assert "catalog/v0.8.4 holds a signed catalog of version 0.6.0, not 0.8.4: a signed release replayed" in out

    # Remote write alone: the signed 0.7.0's file replaced in the remote: its sha256 is refused before writing.
    entry = next(m for m in catalog_at(farm, "0.7.0")["models"] if m["aspect"] == "3x4")
    real = hashlib.md5((farm.root / entry["file"]).read_bytes()).hexdigest()
    copy = signed.ssh_remote / "files" / "md5" / real[:2] / real[2:]
    original = copy.read_bytes()
    copy.chmod(0o644)
    copy.write_bytes(payload)
    fresh = tmp_path / "fresh"  # a fresh clone: nothing cached, the bytes come from the remote
    run("git", "clone", "-q", farm.root, fresh, cwd=tmp_path, env=farm.env)
    try:
        out, _ = pull("0.7.0", *pin, aspect="3x4", repo=fresh)
    finally:
        copy.write_bytes(original)
    assert "sha256 mismatch for artifacts/models/small/112/3x4/model_fp16.tflite (catalog 0.7.0)" in out

    # The team retired the key from 0.7.0 on (a rotation): 0.7.0 signed with it is refused, 0.6.0 is not.
    config = tmp_path / "trust.json"
    config.write_text(json.dumps({"keys": [{"path": str(signed.publisher), "retired_from_version": "0.7.0"}]}))
    out, _ = pull("0.7.0", "--trust-config", str(config))
    assert (f"catalog 0.7.0 is signed by key {ours[:16]} ({signed.publisher}), which trust config {config} retires "
            "from version 0.7.0") in out
    assert "signature: verified" in client.farm("select", "--repo", str(farm.root), "--version", "0.6.0", "--aspect",
                                                "9x16", env={"FARM_TRUST_CONFIG": str(config)})
    out, _ = pull("0.7.0")  # no key pinned at all
    assert "catalog 0.7.0 is signed, and no key is trusted to verify it: pass --trust KEY.pub" in out
