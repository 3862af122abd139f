"""Publish the built catalog: push the shipped files to the DVC remote and tag the version.

    make publish            (python -m stages.publish [--remote NAME])

Refuses, before changing anything, when: the git working tree is dirty; the pipeline is
not up to date (`dvc status`); the catalog's version is not params.yaml's; any catalogued
model failed a gate or no longer has its catalogued sha256; any model skipped the GPU check
(validation.gpu: skip) unless --allow-unchecked-gpu; the version is older than the
newest published one; or the version is already published with different files.
Then it declares the shipped models as DVC artifacts in dvc.yaml (committed), pushes them
to the remote, and tags the commit `catalog/v<version>` and `<artifact>@v<version>` for each
model (DVC's artifact versions). Tags are pushed to `origin` if it exists; a re-run after
a failed push re-pushes files and tags without changing anything else.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

from stages import fileio, paths
from stages.catalog import validate_catalog
from stages.params import ParamsError, load_params

TAG_PREFIX = "catalog/v"
ARTIFACTS_MARKER = "# --- artifacts: written by `make publish` from artifacts/catalog.json; do not edit below ---"


class PublishError(RuntimeError):
    pass


def tag_for(version: str) -> str:
    return f"{TAG_PREFIX}{version}"


def version_key(version: str) -> tuple:
    core, _, pre = version.partition("-")
    return (*(int(p) for p in core.split(".")), pre == "", pre)


def git(*args: str, cwd: Path | str = ".") -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PublishError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def published_versions(repo: str = ".") -> list[str]:
    """Catalog versions tagged in a repository (a path or a git URL), oldest first."""
    out = git("ls-remote", "--tags", "--refs", repo)
    tags = [line.split("refs/tags/", 1)[1] for line in out.splitlines() if "refs/tags/" in line]
    return sorted((t[len(TAG_PREFIX):] for t in tags if t.startswith(TAG_PREFIX)), key=version_key)


def catalog_at(tag: str) -> dict:
    return json.loads(git("show", f"{tag}:{paths.CATALOG.as_posix()}"))


def artifact_name(catalog: dict, aspect: str) -> str:
    return f"{catalog['name']}-{aspect}"


def artifacts_section(catalog: dict) -> dict:
    """dvc.yaml `artifacts:` for every shipped model, so `dvc artifacts get` can fetch them."""
    return {
        artifact_name(catalog, m["aspect"]): {
            "path": m["file"],
            "type": "model",
            "desc": f"DA3-Small depth, {m['height']}x{m['width']} (HxW), FP16 weights, LiteRT GPU-clean",
            "labels": ["depth", "litert", "tflite"],
            "meta": {"aspect": m["aspect"], "ratio": m["ratio"], "shape": m["input"]["shape"],
                     "precision": m["precision"], "sha256": m["sha256"], "catalog_version": catalog["version"]},
        }
        for m in catalog["models"]
    }


def write_artifacts_section(catalog: dict, dvc_file: Path = paths.DVC_FILE) -> bool:
    """Replace the generated tail of dvc.yaml; return whether the file changed."""
    text = dvc_file.read_text()
    head = text.split(ARTIFACTS_MARKER, 1)[0].rstrip("\n")
    tail = yaml.safe_dump({"artifacts": artifacts_section(catalog)}, sort_keys=False)
    new = f"{head}\n\n{ARTIFACTS_MARKER}\n{tail}"
    if new == text:
        return False
    fileio.write_bytes(dvc_file, new.encode())
    return True


def check_publishable(catalog: dict, version: str, allow_unchecked_gpu: bool = False) -> None:
    """Every refusal that depends only on the local state; raises PublishError."""
    dirty = git("status", "--porcelain").strip()
    if dirty:
        raise PublishError(f"the working tree is dirty; commit or stash first:\n{dirty}")
    from dvc.repo import Repo

    stale = Repo(".").status()
    if stale:
        raise PublishError(f"the pipeline is not up to date ({', '.join(sorted(stale))}); run `make farm` "
                           "and commit dvc.lock and artifacts/catalog.json")
    try:
        validate_catalog(catalog)
    except jsonschema.ValidationError as exc:
        raise PublishError(f"{paths.CATALOG} does not follow the catalog schema: {exc.message}") from None
    if catalog["version"] != version:
        raise PublishError(f"{paths.CATALOG} is version {catalog['version']} but params.yaml says {version}; "
                           "run `make farm`")
    for m in catalog["models"]:
        metrics = json.loads(paths.metrics(m["aspect"]).read_text())
        fidelity = m["fidelity"]
        if not (metrics.get("passed") and m["gpu_lint"]["gpu_clean"]
                and fidelity["pearson_min"] >= fidelity["gate_min_pearson"]):
            raise PublishError(f"aspect {m['aspect']} failed its gates: {metrics.get('failures')}")
        if fileio.sha256_file(m["file"]) != m["sha256"]:
            raise PublishError(f"{m['file']} does not match its catalogued sha256")
    unchecked = [m["aspect"] for m in catalog["models"] if not m["gpu"]["checked"]]
    if unchecked and not allow_unchecked_gpu:
        raise PublishError(f"aspects {', '.join(unchecked)} were never run on the GPU accelerator "
                           "(validation.gpu: skip); set validation.gpu: required and run `make farm`, or "
                           "publish anyway with --allow-unchecked-gpu (the catalog says they were not checked)")


def check_version(catalog: dict, published: list[str]) -> bool:
    """Refuse a version that goes backwards or reuses a tag for other files; True if already published."""
    version = catalog["version"]
    if published and version_key(version) < version_key(published[-1]) and version not in published:
        raise PublishError(f"catalog version {version} is older than the newest published {published[-1]}")
    if version not in published:
        return False
    before = {m["aspect"]: m["sha256"] for m in catalog_at(tag_for(version))["models"]}
    now = {m["aspect"]: m["sha256"] for m in catalog["models"]}
    if before != now:
        changes = [f"{a}: {before.get(a, 'absent')[:12]} -> {now.get(a, 'absent')[:12]}"
                   for a in sorted(set(before) | set(now)) if before.get(a) != now.get(a)]
        raise PublishError(f"catalog {version} is already published with other files ({'; '.join(changes)}); "
                           f"bump catalog.version in params.yaml")
    return True


def publish(remote: str | None = None, allow_unchecked_gpu: bool = False) -> str:
    params = load_params()
    catalog = json.loads(paths.CATALOG.read_text())
    check_publishable(catalog, params.catalog.version, allow_unchecked_gpu)
    tag = tag_for(catalog["version"])
    already = check_version(catalog, published_versions("."))
    if write_artifacts_section(catalog):
        git("add", paths.DVC_FILE.as_posix())
        git("commit", "-q", "-m", f"Declare the models of catalog {catalog['version']} as DVC artifacts")
    files = [m["file"] for m in catalog["models"]]
    push = subprocess.run([sys.executable, "-m", "dvc", "push", *(["-r", remote] if remote else []), *files],
                          capture_output=True, text=True)
    if push.returncode != 0:
        raise PublishError(f"dvc push failed: {(push.stdout + push.stderr).strip()}")
    # The catalog tag, plus one `<artifact>@v<version>` tag per model: the GTO convention
    # that `dvc artifacts get REPO NAME --rev v<version>` resolves.
    tags = [tag] + [f"{artifact_name(catalog, m['aspect'])}@v{catalog['version']}" for m in catalog["models"]]
    if not already:
        aspects = ", ".join(f"{m['aspect']} {m['height']}x{m['width']}" for m in catalog["models"])
        git("tag", "-a", tag, "-m", f"{catalog['name']} {catalog['version']}: {aspects}")
        for model_tag in tags[1:]:
            git("tag", "-a", model_tag, "-m", f"{model_tag.split('@')[0]}, catalog {catalog['version']}")
    summary = f"{'re-pushed' if already else 'published'} {catalog['name']} {catalog['version']} as {tag}: {len(files)} models"
    if "origin" in git("remote").split():
        try:
            git("push", "origin", *tags)  # tags only: the branch is yours to push
        except PublishError as exc:
            raise PublishError(f"{summary}, but pushing the tags to origin failed ({exc}); "
                               f"push them with: git push origin {' '.join(tags)}") from None
        summary += "; tags pushed to origin (push your branch too: it holds the artifacts commit)"
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="push the shipped models and tag the catalog version")
    parser.add_argument("--remote", help="DVC remote name (default: the repository's default remote)")
    parser.add_argument("--allow-unchecked-gpu", action="store_true",
                        help="publish models whose GPU check was skipped (validation.gpu: skip)")
    args = parser.parse_args(argv)
    try:
        print(f"publish: {publish(args.remote, args.allow_unchecked_gpu)}")
    except (PublishError, ParamsError, FileNotFoundError) as exc:
        print(f"publish: refused: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
