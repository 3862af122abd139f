"""Publish a tiny catalog to a local-directory DVC remote, then pull it from a separate clone.

Layout, as on one machine: <root>/farm (the farm), <root>/da3-farm-remote (the default
remote: a sibling of the checkout), <root>/app* (clones an app build would use).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stages.fileio import sha256_file
from tests.test_farm_e2e import Farm, repo_files

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


@pytest.fixture(scope="module")
def published(tmp_path_factory, stress_net):
    """A farm with versions 0.1.0 and 0.2.0 (16x9 rebuilt at another shape) published."""
    from stages.weights import write_hub_layout

    root = tmp_path_factory.mktemp("publish")
    farm = Farm(root / "farm")
    for f in repo_files():
        (farm.root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, farm.root / f)
    write_hub_layout(farm.root / "checkpoints" / "stress", stress_net)
    doc = farm.params
    doc["checkpoint"].update(source="local", path="checkpoints/stress")
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
    out = run(sys.executable, "-m", "stages.publish", cwd=farm.root, env=farm.env, ok=False)
    assert "aspects 9x16, 3x4, 16x9 were never run on the GPU accelerator (validation.gpu: skip)" in out
    assert "--allow-unchecked-gpu" in out and not farm.git("tag").strip()
    out = run(sys.executable, "-m", "stages.publish", "--allow-unchecked-gpu", cwd=farm.root, env=farm.env)
    assert "published da3-small-litert 0.1.0 as catalog/v0.1.0: 3 models" in out
    return root, farm


def test_a_skipped_gpu_check_is_visible_in_the_catalog(published):
    _, farm = published
    for m in farm.catalog()["models"]:
        assert m["gpu"] == {"checked": False, "reason": "validation.gpu is 'skip' in params.yaml"}


def test_publish_pushed_files_tagged_and_declared_artifacts(published):
    root, farm = published
    remote = root / "da3-farm-remote"
    catalog = farm.catalog()
    for m in catalog["models"]:
        md5 = hashlib.md5((farm.root / m["file"]).read_bytes()).hexdigest()
        assert (remote / "files" / "md5" / md5[:2] / md5[2:]).is_file()
    assert {"catalog/v0.1.0", "da3-small-litert-9x16@v0.1.0"} <= set(farm.git("tag").split())
    artifacts = yaml.safe_load((farm.root / "dvc.yaml").read_text())["artifacts"]
    assert set(artifacts) == {"da3-small-litert-9x16", "da3-small-litert-3x4", "da3-small-litert-16x9"}
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
    assert "working tree is dirty" in run(sys.executable, "-m", "stages.publish", cwd=farm.root, env=farm.env, ok=False)
    (farm.root / "notes.txt").unlink()

    # Rebuild 16x9 at another shape but keep the version: refused, nothing tagged or pushed.
    doc = farm.params
    doc["aspects"]["16x9"] = {"ratio": "16:9", "long_side": 140}
    farm.set_params(doc)
    ran, _ = farm.repro()
    assert ran == {"patch@16x9", "export@16x9", "quantize@16x9", "validate@16x9", "gpu@16x9", "catalog"}
    farm.git("add", "-A")
    farm.git("commit", "-qm", "16x9 at long side 140")
    out = run(sys.executable, "-m", "stages.publish", "--allow-unchecked-gpu", cwd=farm.root, env=farm.env, ok=False)
    assert "catalog 0.1.0 is already published with other files (16x9:" in out
    assert "bump catalog.version" in out

    doc["catalog"]["version"] = "0.2.0"
    farm.set_params(doc)
    assert farm.repro()[0] == {"catalog"}
    farm.git("add", "-A")
    farm.git("commit", "-qm", "catalog 0.2.0")
    assert "published da3-small-litert 0.2.0" in run(sys.executable, "-m", "stages.publish", "--allow-unchecked-gpu",
                                                     cwd=farm.root, env=farm.env)
    # Going back to an older version is refused.
    doc["catalog"]["version"] = "0.0.9"
    farm.set_params(doc)
    farm.repro()
    farm.git("add", "-A")
    farm.git("commit", "-qm", "older")
    assert "older than the newest published 0.2.0" in run(sys.executable, "-m", "stages.publish",
                                                           "--allow-unchecked-gpu", cwd=farm.root, env=farm.env,
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

    from stages.fidelity import TFLiteModel

    assert TFLiteModel(model).output_shape == (1, 1, *shape)  # a real, loadable model


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
    target = tmp_path / "assets"
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
    assert not target.exists()


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
    help_text = farm_cli("--help", env=env, cwd=tmp_path)
    assert "Orientation is part of the ratio" in help_text and "Ties go to the model with" in help_text
    assert "--camera WxH" in farm_cli("pull", "--help", env=env, cwd=tmp_path)
