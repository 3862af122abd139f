"""`farm verify`: the files in an app's assets, offline, against the signed release folders beside them (which
`pull --trust` writes there): each release's signature, each file's sha256, and each sidecar field against the
sidecar the signed catalog makes (sidecars.py)."""

from __future__ import annotations

import json
from pathlib import Path

from da3_litert_farm.client import npu_files
from da3_litert_farm.client.sidecars import bundle_file_name, bundle_sidecar, model_file_name, sidecar
from da3_litert_farm.client.trust import TRUST_ENV, Trust, TrustError, check_release, release_from_folder, short
from da3_litert_farm.core import fileio

# Sidecar fields that do not come from the signed catalog: how the model was chosen, where it came from, and
# the pull's own verdict.
UNSIGNED_FIELDS = ("selected", "catalog.repo", "signature")


def verify_assets(folder: Path, trust: Trust) -> str:
    """Every .tflite in `folder` (not recursive) and its sidecar, against the signed release folders there
    (`pull --trust` writes them): the signature, the file's sha256, each sidecar fact. Raises TrustError."""
    if not trust:
        raise TrustError(f"verify needs the publisher's public key: --trust KEY.pub (or {TRUST_ENV})")
    if not folder.is_dir():
        raise TrustError(f"{folder} is not a folder")
    releases, keys = {}, set()
    # Only DIR's own files: a link could make verify read, and vouch for, a file elsewhere.
    for path in sorted([*folder.glob("*.release"), *folder.glob("*.tflite"), *folder.glob("*.tflite.json")]):
        if path.is_symlink():
            raise TrustError(f"{path.name} is a symbolic link: verify checks the files in {folder} itself; copy the "
                             f"file there")
    for path in sorted(folder.glob("*.release")):
        release = release_from_folder(path)
        signature = check_release(release, trust, allow_unsigned=False)
        catalog = json.loads(release.catalog)
        releases[catalog["version"]] = catalog
        keys.add(signature["key"])
    if not releases:
        raise TrustError(f"{folder} holds no signed release folder (*.release/, written by `farm pull --trust`): "
                         f"nothing to verify against")
    models = sorted(folder.glob("*.tflite"))
    if not models:
        raise TrustError(f"{folder} holds no .tflite file to verify")
    for model in models:
        side = model.with_name(f"{model.name}.json")
        if not side.is_file():
            raise TrustError(f"{model.name} has no sidecar {side.name}: pull it again")
        try:
            document = json.loads(side.read_text())
            version, repo = document["catalog"]["version"], document["catalog"].get("repo", "")
            if not (isinstance(version, str) and isinstance(repo, str) and isinstance(document.get("selected", ""),
                                                                                       str)):
                raise TypeError("not text")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise TrustError(f"{side.name} is not a sidecar any more (not JSON with catalog.version, catalog.repo "
                             f"and selected as text): it was changed after the pull") from None
        if version not in releases:
            raise TrustError(f"{side.name} names catalog {version!r}, of which {folder} holds no signed release "
                             f"folder")
        catalog = releases[version]
        expected = _expected_sidecar(catalog, model.name, document)
        if expected is None:
            raise TrustError(f"{model.name} is not a file of the signed catalog {version}")
        digest = fileio.sha256_file(model)
        if digest != expected["sha256"]:
            raise TrustError(f"{model.name}: sha256 {digest} is not the signed catalog {version}'s {expected['sha256']}"
                             f": the file was changed after signing")
        changed = _first_difference(expected, document)
        if changed:
            raise TrustError(f"{side.name}: field {changed} differs from the signed catalog {version}: the sidecar "
                             f"was changed after the pull")
    return (f"verified {len(models)} file{'s' if len(models) > 1 else ''} and their sidecars in {folder} against "
            f"catalog {', '.join(sorted(releases))}, signed by key {', '.join(short(k) for k in sorted(keys))}")


def _expected_sidecar(catalog: dict, name: str, actual: dict) -> dict | None:
    """The sidecar `pull` writes for file `name` of `catalog`, with the fields the catalog does not decide taken
    from `actual`."""
    repo = (actual.get("catalog") or {}).get("repo", "") if isinstance(actual.get("catalog"), dict) else ""
    bundle = next((b for b in catalog.get("bundles", []) if bundle_file_name(catalog, b) == name), None)
    if bundle is not None:
        expected = bundle_sidecar(catalog, repo, name, bundle["bundle"])
    else:
        files = {model_file_name(catalog, m): (m, None) for m in catalog["models"]}
        files.update((npu_files.npu_file_name(catalog, m, soc), (m, t)) for m in catalog["models"]
                     for soc, t in npu_files.compiled_for(m).items())
        if name not in files:
            return None
        entry, target = files[name]
        expected = sidecar(catalog, entry, repo, actual.get("selected", ""), name, target)
    expected["catalog"]["repo"] = repo  # as the sidecar has it: public_repo() of what the pull was given
    return expected


def _first_difference(expected, actual, prefix: str = "") -> str | None:
    """The first field (dotted path) where `actual` differs from `expected`, skipping UNSIGNED_FIELDS."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            path = f"{prefix}{key}"
            if path in UNSIGNED_FIELDS:
                continue
            if key not in expected or key not in actual:
                return path
            found = _first_difference(expected[key], actual[key], f"{path}.")
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (a, b) in enumerate(zip(expected, actual)):
            found = _first_difference(a, b, f"{prefix}{i}.")
            if found:
                return found
        return None
    return None if expected == actual and type(expected) is type(actual) else prefix.rstrip(".")
