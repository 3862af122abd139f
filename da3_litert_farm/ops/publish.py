"""Publish the built catalog: push the shipped files to the DVC remote and tag the version.

    make publish            (python -m da3_litert_farm.ops.publish [--remote NAME])

Refuses, before changing anything, when: the git working tree is dirty; the pipeline is
not up to date (`dvc status`); the catalog's version is not params.yaml's; any catalogued
model failed a gate or no longer has its catalogued sha256; any model skipped the GPU check
(validation.gpu: skip) unless --allow-unchecked-gpu; the catalog was built from stress
weights (a model's source: random) unless --allow-stress; a model's weights licence does not
allow commercial use (core/licensing.py) unless --allow-noncommercial; the version is older than the
newest published one; the version is already published with different files; or there is no
publisher key (FARM_SIGNING_KEY, default ~/.config/da3-litert-farm/publisher.pem; `make keys`)
unless --unsigned.

Signed (da3_litert_farm/ops/signing.py): the release folder, the catalog and an in-toto provenance
statement, is signed with the publisher key (model-signing, key mode); provenance.json and
signature.sig are committed under artifacts/release/ with the artifacts declaration, and the catalog
tag's message names the key's fingerprint and the signature's sha256 (or says unsigned).

All or nothing, as the remote and a client see it: the files are pushed to the DVC remote
first; then every tag (`catalog/v<version>`, and `<artifact>@v<version>` per file and bundle, DVC's
artifact versions) is made in one git transaction; then all are pushed to `origin` (if it
exists) with `git push --atomic`. A client lists versions by their tags, so it never sees a
version whose files are not on the remote. A rerun after any failure, or after the publish
was killed at any point, finishes the job and leaves what was already made (tags, the artifacts
commit) as it is. Two clones publishing one version at once: origin takes one clone's tags, and
the other is refused, before it changes anything or when origin rejects its tags (then it deletes
the local tags it made), with the winner's commit and what to do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import jsonschema
import yaml

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.core.cells import bundle_artifact, npu_artifact
from da3_litert_farm.core.licensing import catalog_license
from da3_litert_farm.ops.catalog import shipped, shipped_files, validate_catalog
from da3_litert_farm.ops.cache_check import check_cache
from da3_litert_farm.client.remote import scheme
from da3_litert_farm.ops.remote import committed_remote, local_override
from da3_litert_farm.ops.stall_watch import run_watched
from da3_litert_farm.ops.signing import (RELEASE_DIR, SigningError, key_path, provenance, sign_release, signed_by,
                                         signing_key)
from da3_litert_farm.client.trust import SIGNATURE, UNSIGNED_LINE
from da3_litert_farm.config.params import PARAMS_FILE, ParamsError, load_params
from da3_litert_farm.core.git import GitError, git
from da3_litert_farm.core.releases import (artifact_name, model_tag, published_versions, stress_warning, tag_for,
                                      version_key)

# A push that has read and written nothing for this long is given up on (da3_litert_farm/ops/stall_watch.py);
# FARM_PUSH_STALL_S overrides it (a slow link whose uploads pause longer, or a test).
PUSH_STALL_S = 120
PUSH_STALL_ENV = "FARM_PUSH_STALL_S"
ARTIFACTS_MARKER = "# --- artifacts: written by `make publish` from artifacts/catalog.json; do not edit below ---"


class PublishError(FarmError, RuntimeError):
    pass


def catalog_at(rev: str) -> dict:
    return json.loads(git("show", f"{rev}:{paths.CATALOG.as_posix()}"))


def artifacts_section(catalog: dict) -> dict:
    """dvc.yaml `artifacts:` for every shipped file and bundle, so `dvc artifacts get` can fetch them."""
    labels = ["depth", "litert", "tflite"] + (["stress-weights"] if stress_warning(catalog) else [])
    presets = {m["model"]: m["output"]["model"] for m in catalog["models"]}
    section = {
        artifact_name(catalog, m["cell"]): {
            "path": m["file"],
            "type": "model",
            "desc": f"{m['output']['model']} {m['output']['kind']}, {m['height']}x{m['width']} (HxW), FP16 weights, "
                    "LiteRT GPU-clean",
            "labels": labels,
            "meta": {"cell": m["cell"], "model": m["model"], "tier": m["tier"], "aspect": m["aspect"],
                     "ratio": m["ratio"], "shape": m["input"]["shape"], "precision": m["precision"],
                     "sha256": m["sha256"], "catalog_version": catalog["version"]},
        }
        for m in catalog["models"]
    }
    for m in catalog["models"]:
        for soc, t in (m.get("npu") or {}).get("targets", {}).items():
            section[artifact_name(catalog, npu_artifact(m["cell"], soc))] = {
                "path": t["file"],
                "type": "model",
                "desc": f"{m['output']['model']} {m['output']['kind']}, {m['height']}x{m['width']} (HxW), compiled "
                        f"ahead of time for the NPU of Qualcomm {soc} ({t['product']}, HTP {t['htp_arch']})",
                "labels": labels + ["npu", "qualcomm", soc.lower()],
                "meta": {"cell": m["cell"], "soc": soc, "htp_arch": t["htp_arch"], "shape": m["input"]["shape"],
                         "sha256": t["sha256"], "catalog_version": catalog["version"]},
            }
    for b in catalog["bundles"]:
        section[artifact_name(catalog, bundle_artifact(b["bundle"]))] = {
            "path": b["file"],
            "type": "model",
            "desc": f"{presets[b['model']]} at long side {b['tier']}, every aspect in one file (a signature per "
                    "aspect), FP16 weights, LiteRT GPU-clean",
            "labels": labels + ["bundle"],
            "meta": {"bundle": b["bundle"], "model": b["model"], "tier": b["tier"],
                     "signatures": {s["signature"]: [1, 3, s["height"], s["width"]] for s in b["signatures"]},
                     "precision": b["precision"], "sha256": b["sha256"], "catalog_version": catalog["version"]},
        }
    return section


def declared_text(catalog: dict, dvc_file: Path = paths.DVC_FILE) -> str:
    """dvc.yaml with its generated tail replaced by the artifacts of `catalog`."""
    head = dvc_file.read_text().split(ARTIFACTS_MARKER, 1)[0].rstrip("\n")
    tail = yaml.safe_dump({"artifacts": artifacts_section(catalog)}, sort_keys=False)
    return f"{head}\n\n{ARTIFACTS_MARKER}\n{tail}"


def write_artifacts_section(catalog: dict, dvc_file: Path = paths.DVC_FILE) -> bool:
    """Replace the generated tail of dvc.yaml; return whether the file changed."""
    new = declared_text(catalog, dvc_file)
    if new == dvc_file.read_text():
        return False
    fileio.write_bytes(dvc_file, new.encode())
    return True


def interrupted_declaration(catalog: dict, status: str) -> bool:
    """Whether the only change (`git status --porcelain`) is dvc.yaml declaring exactly these artifacts: what a
    publish killed before committing its declaration leaves. The rerun commits it."""
    changed = [line[3:] for line in status.splitlines()]
    return changed == [paths.DVC_FILE.as_posix()] and paths.DVC_FILE.read_text() == declared_text(catalog)


def check_publishable(catalog: dict, version: str, allow_unchecked_gpu: bool = False,
                      allow_stress: bool = False, allow_noncommercial: bool = False) -> None:
    """Every refusal that depends only on the local state; raises PublishError."""
    status = git("status", "--porcelain")
    if status.strip() and not interrupted_declaration(catalog, status):
        raise PublishError(f"the working tree is dirty; commit or stash first:\n{status.strip()}")
    check_catalog_in_git()
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
        metrics = json.loads(paths.metrics(m["cell"]).read_text())
        fidelity = m["fidelity"]
        if not (metrics.get("passed") and m["gpu_lint"]["gpu_clean"]
                and fidelity["pearson_min"] >= fidelity["gate_min_pearson"]):
            raise PublishError(f"cell {m['cell']} failed its gates: {metrics.get('failures')}")
    for m in shipped_files(catalog).values():
        if fileio.sha256_file(m["file"]) != m["sha256"]:
            raise PublishError(f"{m['file']} does not match its catalogued sha256")
    unchecked = [m["cell"] for m in catalog["models"] if not m["gpu"]["checked"]]
    if unchecked and not allow_unchecked_gpu:
        raise PublishError(f"cells {', '.join(unchecked)} were never run on the GPU accelerator "
                           "(validation.gpu: skip); set validation.gpu: required and run `make farm`, or "
                           "publish anyway with --allow-unchecked-gpu (the catalog says they were not checked)")
    check_stress(catalog, allow_stress)
    check_commercial(catalog, allow_noncommercial)


def noncommercial(catalog: dict) -> dict[str, dict]:
    """The license of each model whose weights do not allow commercial use, by model."""
    licenses = {model: catalog_license(catalog, model) for model in catalog["sources"]}
    return {model: lic for model, lic in licenses.items() if lic["commercial_use"] == "no"}


def check_commercial(catalog: dict, allow_noncommercial: bool) -> None:
    """An app team must never ship non-commercial weights in a commercial app by accident: they need the flag."""
    if (found := noncommercial(catalog)) and not allow_noncommercial:
        weights = "; ".join(f"the weights of models.{model} ({catalog['sources'][model]['checkpoint'].get('repo')}) "
                            f"are {lic['weights']}" for model, lic in found.items())
        raise PublishError(f"catalog {catalog['version']}: {weights}, which does not allow commercial use: an app "
                           "that ships them must be non-commercial. Convert a preset whose weights allow it "
                           "(README.md, Licence), or publish anyway with --allow-noncommercial "
                           "(make publish ARGS=--allow-noncommercial); the catalog, every pull sidecar and "
                           "`farm show` then say commercial_use: no")


def check_catalog_in_git() -> None:
    """Apps read the catalog from the release tag (catalog_at), so a catalog git does not track would be tagged
    without it, and a clean `git status` does not show one that an ignore rule hides."""
    catalog = paths.CATALOG.as_posix()
    if git("ls-files", "--", catalog).strip():
        return
    rule = git("check-ignore", "--verbose", "--no-index", "--", catalog, check=False).strip()
    raise PublishError(f"{catalog} is not tracked by git, so the release tags would lack it and no app could read "
                       f"them{f' (ignored by {rule})' if rule else ''}; run `git add -f {catalog}`, commit, "
                       "and publish again")


def check_stress(catalog: dict, allow_stress: bool) -> None:
    """An app team must never ship noise by accident: stress catalogs need --allow-stress."""
    if stress_warning(catalog) and not allow_stress:
        stress = ", ".join(f"models.{name}.source: random, seed {s['checkpoint']['seed']}"
                           for name, s in catalog["sources"].items() if s["checkpoint"]["source"] == "random")
        raise PublishError(f"catalog {catalog['version']} was built from stress weights ({stress}): its models compute "
                           "noise, not depth. Set each model's source to hub or local and run `make farm`, or publish "
                           "it anyway for a dry "
                           "run with --allow-stress (the catalog, the tags, every pull sidecar and `farm select` "
                           "then say STRESS WEIGHTS)")


def check_version(catalog: dict, published: list[str]) -> bool:
    """Refuse a version that goes backwards or reuses a tag for other files; True if already published."""
    version = catalog["version"]
    if published and version_key(version) < version_key(published[-1]) and version not in published:
        raise PublishError(f"catalog version {version} is older than the newest published {published[-1]}")
    if version not in published:
        return False
    check_same_models(catalog, tag_for(version))
    return True


def check_same_models(catalog: dict, rev: str) -> None:
    """Refuse when the catalog at `rev` ships other files than `catalog` does."""
    before = {name: m["sha256"] for name, m in shipped_files(catalog_at(rev)).items()}
    now = {name: m["sha256"] for name, m in shipped_files(catalog).items()}
    if before != now:
        changes = [f"{a}: {before.get(a, 'absent')[:12]} -> {now.get(a, 'absent')[:12]}"
                   for a in sorted(set(before) | set(now)) if before.get(a) != now.get(a)]
        raise PublishError(f"catalog {catalog['version']} is already published with other files "
                           f"({'; '.join(changes)}) at {rev}; bump catalog.version in params.yaml")


def planned_tags(catalog: dict, signed: dict | None = None) -> dict[str, str]:
    """Every tag of a published version, with its message (which repeats any stress warning); the catalog tag's
    also says who signed it (`signed`: fingerprint and signature sha256), or that it is unsigned."""
    warning = stress_warning(catalog)
    suffix = f"\n\n{warning}" if warning else ""
    aspects = ", ".join(f"{m['cell']} {m['height']}x{m['width']}" for m in catalog["models"])
    trust = (f"signed by key {signed['key']} (sha256 of its public key PEM); {RELEASE_DIR / SIGNATURE} sha256 "
             f"{signed['signature_sha256']}" if signed else UNSIGNED_LINE)
    tags = {tag_for(catalog["version"]): f"{catalog['name']} {catalog['version']}: {aspects}\n\n{trust}{suffix}"}
    for key in shipped(catalog):
        tags[model_tag(catalog, key)] = f"{artifact_name(catalog, key)}, catalog {catalog['version']}{suffix}"
    return tags


def make_tags(catalog: dict, tags: dict[str, str]) -> list[str]:
    """Create the missing tags, all in one git transaction; return the names created.

    Tags already there (from an earlier run, or made by hand) are kept as they are, if they
    point at a commit whose catalog ships the same files; the missing ones join them there.
    """
    existing = {name: git("rev-parse", f"refs/tags/{name}^{{commit}}").strip()
                for name in tags if git("tag", "--list", name).strip()}
    for name, commit in existing.items():
        check_same_models(catalog, commit)
    commits = set(existing.values())
    if len(commits) > 1:
        raise PublishError(f"the tags of catalog {catalog['version']} point at different commits: {existing}; "
                           "delete the wrong ones (git tag -d NAME) and rerun")
    commit = commits.pop() if commits else git("rev-parse", "HEAD").strip()
    missing = [name for name in tags if name not in existing]
    if not missing:
        return []
    tagger = git("var", "GIT_COMMITTER_IDENT").strip()
    objects = {name: git("mktag", stdin=f"object {commit}\ntype commit\ntag {name}\ntagger {tagger}\n\n"
                                        f"{tags[name]}\n").strip()
               for name in missing}
    # One transaction: either every ref is created or none is.
    git("update-ref", "--stdin", stdin="".join(f"create refs/tags/{name} {obj}\n" for name, obj in objects.items()))
    return missing


def check_git_locks() -> None:
    """Refuse, naming them, lock files that would stop the commit: git's own error is cut short of its advice."""
    branch = git("symbolic-ref", "-q", "HEAD", check=False).strip()
    locks = [git("rev-parse", "--git-path", f"{name}.lock").strip() for name in ["index", "HEAD", branch] if name]
    held = " ".join(lock for lock in locks if Path(lock).exists())
    if held:
        raise PublishError(f"{held}: git lock files, left by a git command killed in this repository (or one still "
                           f"running); if none runs, delete them (rm {held}) and rerun `make publish`")


def tags_at(repo: str, names: list[str]) -> dict[str, tuple[str, str]]:
    """Those of the tags `names` that `repo` ("." or "origin") holds: name -> (tag object, its commit)."""
    refs = {ref: oid for oid, ref in (line.split("\t", 1) for line in git("ls-remote", "--tags", repo).splitlines())}
    return {name: (refs[f"refs/tags/{name}"], refs.get(f"refs/tags/{name}^{{}}", refs[f"refs/tags/{name}"]))
            for name in names if f"refs/tags/{name}" in refs}


def check_origin(version: str, names: list[str], made: list[str] = ()) -> None:
    """Refuse when origin holds tags of this version that this clone lacks or has other objects for: another
    publish won. The local tags this run `made` (which origin then refused) are deleted, so that they never
    disagree with origin's; older ones are named for the user to delete."""
    try:
        theirs = tags_at("origin", names)
    except GitError:
        return  # origin cannot be read; the push says why
    mine = tags_at(".", names)
    if all(mine.get(name) == held for name, held in theirs.items()):
        return
    git("update-ref", "--stdin", stdin="".join(f"delete refs/tags/{name} {mine[name][0]}\n" for name in made))
    stale = [name for name in names if name in mine and name not in made and mine[name] != theirs.get(name)]
    winner = theirs.get(tag_for(version), next(iter(theirs.values())))[1]
    raise PublishError(
        f"another publish won catalog {version}: origin holds its tags at commit {winner[:12]}, not at this "
        "clone's" + (" (the tags this run made, which origin refused, are deleted here)" if made else "")
        + (f"; delete this clone's older ones (git tag -d {' '.join(stale)})" if stale else "")
        + "; `git fetch origin --tags` gets the published ones, or bump catalog.version in params.yaml and run "
        "`make farm` to publish this build as a new version")


def write_release(catalog: dict, key: Path | None) -> tuple[bool, dict | None]:
    """artifacts/release/ for this catalog: provenance.json and signature.sig signed with `key`, kept when a
    signature by that key over this catalog is already there; removed when unsigned (key None). Returns (whether
    it changed, what the tag records)."""
    if key is None:
        if not RELEASE_DIR.exists():
            return False, None
        shutil.rmtree(RELEASE_DIR)
        return True, None
    catalog_bytes = paths.CATALOG.read_bytes()
    kept = signed_by(catalog_bytes, RELEASE_DIR, key)
    if kept:
        return False, kept
    commit = git("rev-parse", "HEAD").strip()
    statement = provenance(catalog, commit, yaml.safe_load(PARAMS_FILE.read_text()))
    files = sign_release(catalog_bytes, statement, key, RELEASE_DIR)
    return True, {"key": signing_key(key)[1], "signature_sha256": hashlib.sha256(files[SIGNATURE]).hexdigest()}


def push_target(remote: str | None) -> str:
    """The remote a push goes to, as a failure names it: its name and the URL in force on this machine."""
    try:
        name, url, _ = committed_remote()
        if remote and remote != name:
            return f"the DVC remote {remote!r}"
        return f"the DVC remote {name!r} ({local_override(name) or url})"
    except FarmError:
        return f"the DVC remote {remote!r}" if remote else "the default DVC remote"


def built_catalog() -> dict:
    """The catalog `make farm` wrote; a fresh clone has none yet."""
    try:
        return json.loads(paths.CATALOG.read_text())
    except FileNotFoundError:
        raise PublishError(f"no catalog is built yet ({paths.CATALOG} does not exist): run `make farm` first, "
                           "then commit and publish as README.md's Publish section says") from None


def publish(remote: str | None = None, allow_unchecked_gpu: bool = False, allow_stress: bool = False,
            unsigned: bool = False, allow_noncommercial: bool = False) -> str:
    params = load_params()
    catalog = built_catalog()
    check_publishable(catalog, params.catalog.version, allow_unchecked_gpu, allow_stress, allow_noncommercial)
    key = None if unsigned else signing_key(key_path())[0]
    already = check_version(catalog, published_versions("."))
    origin = "origin" in git("remote").split()
    names = list(planned_tags(catalog))
    if origin:
        check_origin(catalog["version"], names)
    write_artifacts_section(catalog)
    released, signed = write_release(catalog, key)
    # Whatever differs from HEAD: this run's declaration, or one a killed run wrote and never committed.
    if git("status", "--porcelain", "--", paths.DVC_FILE.as_posix(), RELEASE_DIR.as_posix()).strip():
        check_git_locks()
        git("add", "-A", "--", paths.DVC_FILE.as_posix(), *([RELEASE_DIR.as_posix()] if released else []))
        what = " and sign the release" if signed else (" (unsigned)" if released else "")
        git("commit", "-q", "-m", f"Declare the models of catalog {catalog['version']} as DVC artifacts{what}")
    files = [m["file"] for m in shipped_files(catalog).values()]
    check_cache(files, PublishError)  # dvc push uploads cache objects unchecked: repair or refuse first
    stall_s = float(os.environ.get(PUSH_STALL_ENV, PUSH_STALL_S))
    code, output = run_watched([sys.executable, "-m", "dvc", "push", *(["-r", remote] if remote else []), *files],
                               stall_s)
    if code is None:
        raise PublishError(f"dvc push to {push_target(remote)} stopped moving data for {stall_s:.0f} s and was "
                           f"stopped, nothing was tagged: the host accepts connections but answers nothing; check "
                           f"the host, the network or a VPN, then rerun: {output.strip()[-500:]}")
    if code != 0:
        raise PublishError(f"dvc push to {push_target(remote)} failed, nothing was tagged (rerun once the remote "
                           f"works): {output.strip()}")
    tags = planned_tags(catalog, signed)
    made = make_tags(catalog, tags)
    tag = tag_for(catalog["version"])
    npu = len(shipped(catalog)) - len(catalog["models"]) - len(catalog["bundles"])  # cells' files for NPUs
    files = (f"{len(catalog['models'])} file{'s' * (len(catalog['models']) != 1)}"
             + (f", {npu} NPU file{'s' * (npu != 1)}" if npu else ""))
    summary = (f"{'re-pushed' if already and not made else 'published'} {catalog['name']} {catalog['version']} "
               f"as {tag}: {files} and {len(catalog['bundles'])} bundle{'s' * (len(catalog['bundles']) != 1)}")
    if stress_warning(catalog):
        summary += " (STRESS WEIGHTS: --allow-stress)"
    if noncommercial(catalog):
        summary += f" (NON-COMMERCIAL WEIGHTS of {', '.join(noncommercial(catalog))}: --allow-noncommercial)"
    if not remote and scheme(committed_remote()[1]) == "local":
        summary += (f" to a folder on this machine ({committed_remote()[1]}): only this machine can pull it; "
                    "`make remote URL=...` points the committed remote at S3 or SSH")
    summary += (f"; signed by key {signed['key'][:16]} ({key})" if signed
                else "; UNSIGNED (--unsigned): apps that pin a publisher key refuse it")
    if origin:
        try:
            # Tags only (the branch is yours to push); --atomic: origin gets all of them or none.
            git("push", "--atomic", "origin", *(f"refs/tags/{name}" for name in tags))
        except GitError as exc:
            # Another clone may have pushed this version's tags first: then a rerun can never push ours.
            check_origin(catalog["version"], names, made)
            raise PublishError(f"{summary} locally, but pushing the tags to origin failed, and origin got none "
                               f"of them ({exc}); rerun `make publish` to push them") from None
        summary += "; tags pushed to origin (push your branch too: it holds the artifacts commit)"
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="push the shipped models and tag the catalog version")
    parser.add_argument("--remote", help="DVC remote name (default: the repository's default remote)")
    parser.add_argument("--allow-unchecked-gpu", action="store_true",
                        help="publish models whose GPU check was skipped (validation.gpu: skip)")
    parser.add_argument("--allow-stress", action="store_true",
                        help="publish a catalog built from stress weights (a model's source: random), for dry runs")
    parser.add_argument("--allow-noncommercial", action="store_true",
                        help="publish a catalog whose weights licence does not allow commercial use (CC BY-NC)")
    parser.add_argument("--unsigned", action="store_true",
                        help="publish without signing (no publisher key): the tag says unsigned, and apps that pin "
                             "a key refuse it")
    args = parser.parse_args(argv)
    try:
        done = publish(args.remote, args.allow_unchecked_gpu, args.allow_stress, args.unsigned,
                       args.allow_noncommercial)
        print(f"publish: {done}")
    except (PublishError, SigningError, GitError, ParamsError, FileNotFoundError) as exc:
        print(f"publish: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
