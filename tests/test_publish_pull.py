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
from da3_litert_farm.report.report_check import check_report
from tests.farm_repo import Farm, repo_files
from tests.remote_servers import S3, SSH, free_port, s3_server, silent_server, ssh_server

REPO = Path(__file__).resolve().parents[1]
FARM_BIN = Path(sys.executable).parent / "farm"
TINY = {"9x16": {"ratio": "9:16", "long_side": 112}, "3x4": {"ratio": "3:4", "long_side": 112},
        "16x9": {"ratio": "16:9", "long_side": 112}}


def run(*cmd, cwd, env, ok=True):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def farm_cli(*args, env, cwd, ok=True):
    return run(FARM_BIN, *args, cwd=cwd, env=env, ok=ok)


def listing(directory: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(directory.iterdir())} if directory.exists() else {}


ALLOW = ("--allow-unchecked-gpu", "--allow-stress")


@pytest.fixture(scope="module")
def published(module_dir):
    """A stress-weights farm with versions 0.1.0 and 0.2.0 (16x9 rebuilt at another shape) published."""
    root = module_dir("publish")
    farm = Farm(root / "farm")
    for f in repo_files():
        (farm.root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, farm.root / f)
    doc = farm.params
    doc["checkpoint"].update(source="random", seed=0)
    doc["aspects"] = dict(TINY)
    # The GPU path is tested in test_farm_e2e; here its skip path: refused, then allowed explicitly.
    doc["validation"]["gpu"] = "skip"
    farm.set_params(doc)
    farm.git("init", "-q")
    farm.git("config", "user.email", "t@t")
    farm.git("config", "user.name", "t")
    farm.repro()
    farm.git("add", "-A")
    farm.git("commit", "-qm", "catalog 0.1.0")
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", cwd=farm.root, env=farm.env, ok=False)
    assert "aspects 9x16, 3x4, 16x9 were never run on the GPU accelerator (validation.gpu: skip)" in out
    assert "--allow-unchecked-gpu" in out and not farm.git("tag").strip()
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", "--allow-unchecked-gpu", cwd=farm.root, env=farm.env,
              ok=False)
    assert ("catalog 0.1.0 was built from stress weights (checkpoint.source: random, seed 0): its models compute "
            "noise, not depth") in out
    assert "--allow-stress" in out and not farm.git("tag").strip()
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", *ALLOW, cwd=farm.root, env=farm.env)
    assert ("published da3-small-litert 0.1.0 as catalog/v0.1.0: 3 models and their bundle "
            "(STRESS WEIGHTS: --allow-stress)") in out
    return root, farm


def test_a_stress_catalog_says_so_in_the_catalog_and_every_tag(published):
    _, farm = published
    catalog = farm.catalog()
    assert catalog["checkpoint"]["source"] == "random" and catalog["warning"].startswith("STRESS WEIGHTS")
    for tag in ["catalog/v0.1.0", "da3-small-litert-bundle@v0.1.0"] + [f"da3-small-litert-{a}@v0.1.0" for a in TINY]:
        assert "STRESS WEIGHTS" in farm.git("tag", "-l", "-n99", tag), tag
    labels = yaml.safe_load((farm.root / "dvc.yaml").read_text())["artifacts"]["da3-small-litert-3x4"]["labels"]
    assert "stress-weights" in labels


def test_trained_weights_need_no_stress_flag():
    from da3_litert_farm.ops.publish import PublishError, check_stress

    catalog = {"version": "1.0.0", "checkpoint": {"source": "local", "seed": None}}
    check_stress(catalog, allow_stress=False)  # local (and hub) weights publish without the flag
    catalog["checkpoint"].update(source="random", seed=3)
    with pytest.raises(PublishError, match="seed 3"):
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
    for m in catalog["models"] + [catalog["bundle"]]:
        md5 = hashlib.md5((farm.root / m["file"]).read_bytes()).hexdigest()
        assert (remote / "files" / "md5" / md5[:2] / md5[2:]).is_file()
    assert {"catalog/v0.1.0", "da3-small-litert-9x16@v0.1.0", "da3-small-litert-bundle@v0.1.0"} <= set(
        farm.git("tag").split())
    artifacts = yaml.safe_load((farm.root / "dvc.yaml").read_text())["artifacts"]
    assert set(artifacts) == {"da3-small-litert-9x16", "da3-small-litert-3x4", "da3-small-litert-16x9",
                              "da3-small-litert-bundle"}
    assert artifacts["da3-small-litert-bundle"]["meta"]["signatures"] == {
        "9x16": [1, 3, 112, 70], "3x4": [1, 3, 112, 84], "16x9": [1, 3, 70, 112]}
    meta = artifacts["da3-small-litert-9x16"]["meta"]
    assert meta["shape"] == [1, 3, 112, 70] and meta["precision"] == "fp16-weights" and meta["aspect"] == "9x16"
    assert artifacts["da3-small-litert-9x16"]["type"] == "model"
    # Plain DVC fetches the published model by artifact name and by path at the tag.
    got = root / "got"
    run(sys.executable, "-m", "dvc", "artifacts", "get", farm.root, "da3-small-litert-9x16", "--rev", "v0.1.0",
        "-o", got / "by-name.tflite", cwd=root, env=farm.env)
    run(sys.executable, "-m", "dvc", "get", farm.root, "artifacts/models/9x16/model_fp16.tflite", "--rev",
        "catalog/v0.1.0", "-o", got / "by-path.tflite", cwd=root, env=farm.env)
    expected = next(m["sha256"] for m in catalog["models"] if m["aspect"] == "9x16")
    assert sha256_file(got / "by-name.tflite") == sha256_file(got / "by-path.tflite") == expected
    assert farm.git("status", "--porcelain").strip() == ""  # publish committed what it wrote


def test_publish_refusals(published):
    _, farm = published
    (farm.root / "notes.txt").write_text("wip")
    assert "working tree is dirty" in run(sys.executable, "-m", "da3_litert_farm.ops.publish", cwd=farm.root, env=farm.env, ok=False)
    (farm.root / "notes.txt").unlink()

    # Rebuild 16x9 at another shape but keep the version: refused, nothing tagged or pushed.
    doc = farm.params
    doc["aspects"]["16x9"] = {"ratio": "16:9", "long_side": 140}
    farm.set_params(doc)
    ran, _ = farm.repro()
    assert ran == {"params", "patch@16x9", "export@16x9", "quantize@16x9", "validate@16x9", "gpu@16x9", "bundle",
                   "catalog", "report"}
    farm.git("add", "-A")
    farm.git("commit", "-qm", "16x9 at long side 140")
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", *ALLOW, cwd=farm.root, env=farm.env, ok=False)
    assert "catalog 0.1.0 is already published with other files (da3-small-litert-16x9:" in out
    assert "da3-small-litert-bundle:" in out  # the bundle holds the rebuilt 16x9 too
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
    out = farm_cli("pull", "--allow-stress", "--repo", app, "--version", "0.1.0", "--camera", camera, "--out", target, env=env, cwd=tmp_path)
    assert f"-> {aspect} " in out
    model = target / f"da3-small-litert-{aspect}-{shape[0]}x{shape[1]}-fp16.tflite"
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
    out = farm_cli("pull", "--allow-stress", "--repo", app, "--version", "0.1.0", "--bundle", "--out", target, env=env, cwd=tmp_path)
    assert "bundle of 16x9, 3x4, 9x16" in out and "WARNING: STRESS WEIGHTS" in out  # signatures in name order
    bundle = target / "da3-small-litert-bundle-fp16.tflite"
    side = json.loads((target / f"{bundle.name}.json").read_text())
    catalog = json.loads(farm.git("show", "catalog/v0.1.0:artifacts/catalog.json"))  # as published
    assert side["sha256"] == sha256_file(bundle) == catalog["bundle"]["sha256"]
    assert side["kind"] == "bundle" and side["stress_weights"] is True
    assert [(s["signature"], s["input"]["shape"]) for s in side["signatures"]] == [
        ("16x9", [1, 3, 70, 112]), ("3x4", [1, 3, 112, 84]), ("9x16", [1, 3, 112, 70])]
    assert all(s["input"]["preprocessing"]["std"] == [0.229, 0.224, 0.225] for s in side["signatures"])
    assert bundle.stat().st_size < 0.5 * sum(m["bytes"] for m in catalog["models"])  # weights stored once

    from da3_litert_farm.checks.fidelity import TFLiteModel
    from da3_litert_farm.model.photo_input import cover_and_center_crop, load_photo, normalize

    for m in catalog["models"]:  # each signature against its own file of the same version, pulled alone
        single = tmp_path / "single" / m["aspect"]
        farm_cli("pull", "--allow-stress", "--repo", app, "--version", "0.1.0", "--aspect", m["aspect"], "--out", single, env=env,
                 cwd=tmp_path)
        (path,) = single.glob("*.tflite")
        image = normalize(cover_and_center_crop(load_photo("coffee"), m["height"], m["width"]))
        assert (TFLiteModel(bundle, signature=m["aspect"])(image) == TFLiteModel(path)(image)).all()
    out = farm_cli("select", "--repo", app, "--version", "0.1.0", "--camera", "3024x4032", env=env, cwd=tmp_path)
    assert "in the bundle: signature '3x4' of artifacts/bundle/model_fp16.tflite" in out


def test_pull_by_aspect_and_version(app_clone, tmp_path):
    app, env = app_clone
    farm_cli("pull", "--allow-stress", "--repo", app, "--version", "0.2.0", "--aspect", "16x9", "--out", tmp_path, env=env, cwd=tmp_path)
    assert (tmp_path / "da3-small-litert-16x9-84x140-fp16.tflite").is_file()


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
        out = farm_cli("pull", "--allow-stress", "--repo", app, "--version", "0.1.0", "--aspect", "3x4", "--out", target,
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
    out = farm_cli("pull", "--allow-stress", "--repo", app, "--version", "9.9.9", "--aspect", "9x16", "--out", target,
                   env=env, cwd=tmp_path, ok=False)
    assert "catalog version '9.9.9' is not published" in out and "published: 0.1.0, 0.2.0" in out
    out = farm_cli("pull", "--allow-stress", "--repo", app, "--version", "0.1.0", "--aspect", "1x1", "--out", target,
                   env=env, cwd=tmp_path, ok=False)
    assert "aspect '1x1' is not in catalog 0.1.0; available: ['16x9', '3x4', '9x16']" in out
    remote = root / "da3-farm-remote"
    fresh = root / "app-offline"
    run("git", "clone", "-q", farm.root, fresh, cwd=root, env=env)
    remote.rename(root / "remote-away")
    try:
        out = farm_cli("pull", "--allow-stress", "--repo", fresh, "--version", "0.1.0", "--aspect", "9x16", "--out", target,
                       env=env, cwd=tmp_path, ok=False)
    finally:
        (root / "remote-away").rename(remote)
    assert "cannot download artifacts/models/9x16/model_fp16.tflite" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_diff_and_versions(app_clone, tmp_path):
    app, env = app_clone
    assert farm_cli("versions", "--repo", app, env=env, cwd=tmp_path).split() == ["0.1.0", "0.2.0"]
    rows = json.loads(farm_cli("diff", "--repo", app, "0.1.0", "0.2.0", "--json", env=env, cwd=tmp_path))
    by = {r["aspect"]: r for r in rows}
    assert by["16x9"]["change"] == "changed" and by["16x9"]["shape"] == "70x112 -> 84x140"
    assert by["16x9"]["bytes_delta"] != 0
    assert by["9x16"]["change"] == "same" and by["9x16"]["bytes_delta"] == 0
    text = farm_cli("diff", "--repo", app, "0.1.0", "0.2.0", env=env, cwd=tmp_path)
    assert "catalog 0.1.0 -> 0.2.0" in text and "16x9" in text
    assert by["16x9"]["gpu_pearson_min"] is None and "pearson_min GPU FP16" in text and "not checked" in text


def test_select_explains_the_choice(app_clone, tmp_path):
    app, env = app_clone
    out = farm_cli("select", "--repo", app, "--version", "0.1.0", "--camera", "1080x2400", env=env, cwd=tmp_path)
    assert "camera 1080x2400" in out and "-> 9x16" in out
    assert "WARNING: STRESS WEIGHTS: built from seeded random weights" in out
    help_text = farm_cli("--help", env=env, cwd=tmp_path)
    words = " ".join(help_text.split())
    assert "crops the least" in words and "Ties go to the model" in words
    assert "W x H is the frame as it is fed to the model, after rotation" in words
    assert "--camera WxH" in farm_cli("pull", "--help", env=env, cwd=tmp_path)
    # A sensor size passed unrotated: the pick, and what the portrait frame would get.
    out = farm_cli("select", "--repo", app, "--version", "0.1.0", "--camera", "4032x3024", env=env, cwd=tmp_path)
    assert "-> 16x9" in out and "4032x3024 (landscape) gets 16x9 (HxW 70x112); if your app feeds the frame " \
                                "portrait, pass 3024x4032: it gets 3x4 (HxW 112x84)" in out


def test_pull_refuses_a_stress_catalog_unless_allowed(app_clone, tmp_path):
    app, env = app_clone
    target = tmp_path / "assets"
    out = farm_cli("pull", "--repo", app, "--version", "0.1.0", "--aspect", "9x16", "--out", target, env=env,
                   cwd=tmp_path, ok=False)
    assert "catalog 0.1.0 was built from stress weights: its models compute noise, not depth; nothing was " \
           "downloaded" in out and "--allow-stress" in out
    assert list(tmp_path.iterdir()) == []


def test_pull_places_model_and_sidecar_so_no_reader_pairs_them_wrongly(tmp_path, monkeypatch):
    """Kill `place` after each of its steps: a sidecar on disk always describes the model beside it."""
    from da3_litert_farm.client import cli

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

        monkeypatch.setattr(cli.os, "remove", interrupting(os.remove))
        monkeypatch.setattr(cli.os, "replace", interrupting(os.replace))
        with pytest.raises(KeyboardInterrupt):
            cli.place(*new, out)
        monkeypatch.undo()
        assert consistent(out), f"killed after {stop_after} steps: a sidecar beside another model"
    out = tmp_path / "done"
    pair(out, b"old model")
    cli.place(*pair(tmp_path / "new", b"new model"), out)
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
    expected = {"refs/tags/catalog/v0.3.0", "refs/tags/da3-small-litert-bundle@v0.3.0"} | {
        f"refs/tags/da3-small-litert-{a}@v0.3.0" for a in TINY}

    # 1. The DVC remote cannot be written: nothing is tagged anywhere.
    (root / "blocker").write_text("a file where the remote's folder should be")
    run(sys.executable, "-m", "dvc", "remote", "modify", "--local", "storage", "url", root / "blocker" / "remote",
        cwd=farm.root, env=farm.env)
    out = run(*publish, cwd=farm.root, env=farm.env, ok=False)
    assert "dvc push failed, nothing was tagged" in out
    assert _tags(farm.root, "0.3.0") == {} and _tags(origin, "0.3.0") == {}
    head = farm.git("rev-parse", "HEAD")  # the artifacts commit, made before pushing
    (farm.root / ".dvc" / "config.local").unlink()

    # 2. One tag cannot be created (a ref is in its way): none of the tags is made.
    blocked = "refs/tags/da3-small-litert-3x4@v0.3.0"
    farm.git("update-ref", f"{blocked}/x", "HEAD")
    out = run(*publish, cwd=farm.root, env=farm.env, ok=False)
    assert "update-ref" in out and "da3-small-litert-3x4@v0.3.0" in out
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
    out = run(venv / "bin" / "farm", "pull", "--allow-stress", "--repo", farm.root, "--version", "0.1.0", "--camera", "1080x1920",
              "--out", target, cwd=tmp_path, env=env)
    assert "-> 9x16" in out and "WARNING: STRESS WEIGHTS" in out
    model = target / "da3-small-litert-9x16-112x70-fp16.tflite"
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
    pull = ("pull", "--allow-stress", "--repo", str(remotes.farm.root), "--version", "0.5.0-rc.10", "--out", str(target))
    creds = {**remotes.s3.credentials(), "HOME": str(tmp_path)}
    out = plain_client.farm(*pull, "--camera", "1080x1920", env=creds, ok=False, echo=True)
    assert "needs DVC's s3 plugin, which this install lacks: pip install \"da3-litert-farm[s3]\"" in out
    assert not (tmp_path / "app").exists()

    client = new_client(tmp_path, published[1].env, sys.executable, "[s3]")  # as the message says, in one go
    started = time.monotonic()
    out = client.farm(*pull, "--camera", "1080x1920", env=creds)
    print(f"\nfarm pull from the S3 server: {time.monotonic() - started:.1f} s")  # a figure for the record (-s)
    assert "-> 9x16" in out
    (model,) = target.glob("*.tflite")
    catalogued = {m["aspect"]: m["sha256"] for m in catalog_at(remotes.farm, "0.5.0-rc.10")["models"]}
    assert sha256_file(model) == catalogued["9x16"]
    sidecar = (target / f"{model.name}.json").read_text()
    assert remotes.s3.secret not in sidecar and remotes.s3.key_id not in sidecar
    assert sorted(p.name for p in target.iterdir()) == sorted([model.name, f"{model.name}.json"])  # no staging left

    elsewhere = tmp_path / "elsewhere" / "assets"
    failing = ("pull", "--allow-stress", "--repo", str(remotes.farm.root), "--version", "0.5.0-rc.10", "--aspect",
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
    pull = ("pull", "--allow-stress", "--repo", str(remotes.farm.root), "--version", "0.5.0", "--aspect", "3x4",
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
    assert "weights: stress: seeded random weights (seed 0)" in text and "WARNING: STRESS WEIGHTS" in text
    for m in catalog["models"]:
        row = next(line for line in text.splitlines() if line.startswith(f"{m['aspect']} "))
        assert f"{m['height']}x{m['width']}" in row and m["sha256"][:12] in row and f"{m['bytes'] / 1e6:.2f}" in row
        assert f"{1 - m['fidelity']['pearson_min']:.1e}" in row and "not checked" in row  # this farm skips the GPU
    assert catalog["bundle"]["sha256"][:12] in text and "litert-torch " + catalog["tools"]["litert-torch"] in text
    shown = json.loads(farm_cli("show", "--repo", farm.root, "--version", "0.5.0", "--json", env=farm.env,
                                cwd=tmp_path))
    assert [(r["aspect"], r["sha256"]) for r in shown["models"]] == [(m["aspect"], m["sha256"]) for m in catalog["models"]]
    assert shown["weights"]["kind"] == "stress" and shown["tools"] == catalog["tools"]


# ---- the README's recipes, line by line as printed ----

def readme_block(heading: str) -> list[str]:
    """The lines of the first ```sh block after `heading` in README.md, comments kept (they may be steps)."""
    text = (REPO / "README.md").read_text()
    after = text[text.index(heading):]
    block = after[after.index("```sh\n") + len("```sh\n"):]
    return [line for line in block[:block.index("```")].splitlines() if line.strip()]


def sh(line: str, cwd: Path, env: dict) -> str:
    proc = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"$ {line}\n{proc.stdout}{proc.stderr}"[-6000:]
    return proc.stdout + proc.stderr


def test_the_readmes_publish_and_app_recipes_run_as_printed(published, module_dir):
    """A clone of a built farm follows README's Publish section to a real S3 server, then an app build follows
    its first section from a fresh venv. What the test supplies: the placeholders (bucket, endpoint, repository,
    version), the version bump the README asks for in a comment, `ARGS` in the environment (stress weights and a
    skipped GPU check need their flags) and `--allow-stress` on `farm pull`, for the same reason."""
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
        env = {**farm.env, **s3.credentials(), "ARGS": " ".join(ALLOW)}

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
        assert f"published da3-small-litert {version} as catalog/v{version}" in out
        assert farm.git("status", "--porcelain") == ""
        assert f"url = s3://{s3.bucket}/readme" in farm.git("show", f"catalog/v{version}:.dvc/config")

        app = work / "app-build"
        app.mkdir()
        venv = app / "venv"
        run(sys.executable, "-m", "venv", venv, cwd=app, env=env)
        app_env = {**{k: v for k, v in env.items() if k != "VIRTUAL_ENV"}, "HOME": str(app),
                   "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        outputs = []
        for line in readme_block("## Use a model in an app"):
            line = re.sub(r"\s+#.*$", "", line).replace("git+<farm repo url>", f"git+file://{farm.root}")
            line = re.sub(r"--repo R\b", f"--repo {farm.root}", line).replace("0.1.0", version)
            if line.startswith("farm pull"):
                line += " --allow-stress"
            outputs.append(sh(line, app, app_env))
        assert "torch" not in run(venv / "bin" / "python", "-m", "pip", "list", cwd=app, env=app_env).lower()
        catalog = catalog_at(farm, version)
        shipped = {m["aspect"]: m["sha256"] for m in catalog["models"]}
        assets = app / "app" / "src" / "main" / "assets" / "depth"
        by_name = {p.name: sha256_file(p) for p in assets.glob("*.tflite")}
        assert sorted(by_name.values()) == sorted([shipped["3x4"], catalog["bundle"]["sha256"]])
        assert any(version in o for o in outputs) and any("-> 3x4" in o for o in outputs)
        for sidecar in assets.glob("*.json"):
            assert json.loads(sidecar.read_text())["license"] == catalog["license"]


def test_a_repository_that_never_published_says_how_to(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path / "fresh")], check=True)
    out = farm_cli("show", "--repo", tmp_path / "fresh", "--version", "0.1.0", env=os.environ, cwd=tmp_path, ok=False)
    assert "catalog version '0.1.0' is not published" in out and "published: none" in out
    assert "`make publish` after `make farm`" in out
