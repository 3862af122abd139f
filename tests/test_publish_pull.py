"""Publish a tiny catalog to a local-directory DVC remote, then pull it from a separate clone.

Layout, as on one machine: <root>/farm (the farm), <root>/da3-farm-remote (the default
remote: a sibling of the checkout), <root>/app* (clones an app build would use).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from da3_litert_farm.core.fileio import sha256_file
from da3_litert_farm.report.report_check import check_report
from tests.farm_repo import Farm, repo_files

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
def published(tmp_path_factory):
    """A stress-weights farm with versions 0.1.0 and 0.2.0 (16x9 rebuilt at another shape) published."""
    root = tmp_path_factory.mktemp("publish")
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
    out = farm_cli("pull", "--repo", app, "--version", "0.1.0", "--camera", camera, "--out", target, env=env, cwd=tmp_path)
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
    out = farm_cli("pull", "--repo", app, "--version", "0.1.0", "--bundle", "--out", target, env=env, cwd=tmp_path)
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
        farm_cli("pull", "--repo", app, "--version", "0.1.0", "--aspect", m["aspect"], "--out", single, env=env,
                 cwd=tmp_path)
        (path,) = single.glob("*.tflite")
        image = normalize(cover_and_center_crop(load_photo("coffee"), m["height"], m["width"]))
        assert (TFLiteModel(bundle, signature=m["aspect"])(image) == TFLiteModel(path)(image)).all()
    out = farm_cli("select", "--repo", app, "--version", "0.1.0", "--camera", "3024x4032", env=env, cwd=tmp_path)
    assert "in the bundle: signature '3x4' of artifacts/bundle/model_fp16.tflite" in out


def test_pull_by_aspect_and_version(app_clone, tmp_path):
    app, env = app_clone
    farm_cli("pull", "--repo", app, "--version", "0.2.0", "--aspect", "16x9", "--out", tmp_path, env=env, cwd=tmp_path)
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
        out = farm_cli("pull", "--repo", app, "--version", "0.1.0", "--aspect", "3x4", "--out", target,
                       env=farm.env, cwd=tmp_path, ok=False)
    finally:
        stored.write_bytes(original)
    assert "sha256 mismatch" in out and "left untouched" in out
    assert listing(target) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".farm-pull")]


def test_pull_errors_leave_target_untouched(published, app_clone, tmp_path):
    root, farm = published
    app, env = app_clone
    target = tmp_path / "app" / "src" / "assets"  # none of it exists: a failed pull creates nothing
    out = farm_cli("pull", "--repo", app, "--version", "9.9.9", "--aspect", "9x16", "--out", target,
                   env=env, cwd=tmp_path, ok=False)
    assert "catalog version '9.9.9' is not published" in out and "published: 0.1.0, 0.2.0" in out
    out = farm_cli("pull", "--repo", app, "--version", "0.1.0", "--aspect", "1x1", "--out", target,
                   env=env, cwd=tmp_path, ok=False)
    assert "aspect '1x1' is not in catalog 0.1.0; available: ['16x9', '3x4', '9x16']" in out
    remote = root / "da3-farm-remote"
    fresh = root / "app-offline"
    run("git", "clone", "-q", farm.root, fresh, cwd=root, env=env)
    remote.rename(root / "remote-away")
    try:
        out = farm_cli("pull", "--repo", fresh, "--version", "0.1.0", "--aspect", "9x16", "--out", target,
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
    assert "crops the least" in help_text and "1080x1024" in help_text and "Ties go to the model" in help_text
    assert "--camera WxH" in farm_cli("pull", "--help", env=env, cwd=tmp_path)


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


def test_the_client_alone_pulls_in_a_fresh_venv(published, tmp_path):
    """`pip install <farm repo>` gives the client: no torch, no converter, no JAX, on the oldest Python here."""
    root, farm = published
    source = tmp_path / "farm-src"  # what `pip install git+<repo>` builds from: the repo's files
    for f in repo_files():
        (source / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, source / f)
    python = _oldest_python()
    venv = tmp_path / "client-venv"
    run(python, "-m", "venv", venv, cwd=tmp_path, env=farm.env)
    env = {k: v for k, v in farm.env.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", source, cwd=tmp_path, env=env)
    installed = run(venv / "bin" / "python", "-m", "pip", "list", "--format=freeze", cwd=tmp_path, env=env).lower()
    for heavy in ("torch", "litert-torch", "ai-edge-litert", "ai-edge-quantizer", "jax", "jaxlib"):
        assert f"\n{heavy}==" not in f"\n{installed}", f"{heavy} came with the client"
    site = next((venv / "lib").glob("python3.*/site-packages"))
    assert (site / "da3_litert_farm").is_dir() and not (site / "stages").exists()

    target = tmp_path / "app" / "assets"
    out = run(venv / "bin" / "farm", "pull", "--repo", farm.root, "--version", "0.1.0", "--camera", "1080x1920",
              "--out", target, cwd=tmp_path, env=env)
    assert "-> 9x16" in out and "WARNING: STRESS WEIGHTS" in out
    model = target / "da3-small-litert-9x16-112x70-fp16.tflite"
    expected = next(m["sha256"] for m in json.loads(farm.git("show", "catalog/v0.1.0:artifacts/catalog.json"))["models"]
                    if m["aspect"] == "9x16")
    assert sha256_file(model) == expected == json.loads((target / f"{model.name}.json").read_text())["sha256"]
    assert "python 3." in run(venv / "bin" / "python", "-c", "import sys; print('python', sys.version)",
                              cwd=tmp_path, env=env).lower()
