"""Trust: a published release's signature, checked against the publisher keys an app pins, offline.

What a publisher signs (`make publish`, da3_litert_farm/ops/signing.py) is a release folder of two small files:
the version's `catalog.json` (every shipped file's sha256, its shapes, preprocessing and fidelity: what a
sidecar says) and `provenance.json` (an in-toto Statement v1: every shipped file by name and sha256, the code
commit, the checkpoint with its weights' sha256, the tools and params). The signature is OpenSSF model-signing's
key mode (a Sigstore bundle holding a DSSE envelope over the manifest of the folder's file hashes; P-256, P-384
or P-521 keys; no network, no transparency log), committed at the tag as `artifacts/release/signature.sig`
beside `artifacts/release/provenance.json`. The chain: signature -> catalog -> each file's sha256, which `pull`
checks before it writes a file.

Trust comes from the app, never from the repository it verifies: keys given with `--trust KEY.pub` (repeatable)
or `--trust-config FILE`, else the environment (FARM_TRUST: paths joined by os.pathsep; FARM_TRUST_CONFIG). A key
is named by its fingerprint: the sha256 of its public key in PEM (SubjectPublicKeyInfo), which is also the key
id model-signing writes into every signature, so a refusal can name the key a signature claims.

Standard library here; model-signing (the `verify` extra) is imported only to verify, so the base client runs
without it.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from da3_litert_farm.client.show import CatalogError, check_catalog
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.git import GitError, git, git_bytes
from da3_litert_farm.core.releases import tag_for, version_key

RELEASE_DIR = "artifacts/release"  # in the repository at a version's tag: signature.sig, provenance.json
CATALOG_PATH = "artifacts/catalog.json"
SIGNATURE = "signature.sig"
PROVENANCE = "provenance.json"
CATALOG = "catalog.json"
TRUST_ENV = "FARM_TRUST"
TRUST_CONFIG_ENV = "FARM_TRUST_CONFIG"
VERIFY_EXTRA = 'pip install "da3-litert-farm[verify]"'
# What the catalog tag's message says (ops/publish.planned_tags writes it; the client reads it back).
SIGNED_LINE = re.compile(r"^signed by key ([0-9a-f]{64})", re.M)
UNSIGNED_LINE = "unsigned: published with --unsigned"


class TrustError(FarmError, RuntimeError):
    """A release's signature is missing, from a key the app does not trust, or does not cover what it holds."""


def _model_signing():
    """model-signing's verifying and hashing modules, or a TrustError naming the extra that brings them."""
    try:
        from model_signing import hashing, verifying
    except ImportError:
        raise TrustError(f"verifying a signature needs model-signing, which this install lacks: {VERIFY_EXTRA}"
                         ) from None
    return verifying, hashing


def hashing_config():
    """How a release folder is hashed, on both sides: every file, sha256, no symlinks."""
    _, hashing = _model_signing()
    return hashing.Config().use_file_serialization(hashing_algorithm="sha256", allow_symlinks=False)


def fingerprint(public_pem: bytes) -> str:
    """sha256 of the public key in PEM (SubjectPublicKeyInfo, as `openssl pkey -pubin` prints it)."""
    _model_signing()  # cryptography comes with the verify extra
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_public_key(public_pem)
    except ValueError as exc:
        raise TrustError(f"not a PEM public key: {exc}") from None
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def short(fp: str) -> str:
    return fp[:16]


# ---- which keys an app trusts ----

@dataclass
class TrustedKey:
    path: Path
    fingerprint: str
    retired_from_version: Optional[str] = None  # refused for releases of this version and later
    not_after: Optional[str] = None  # YYYY-MM-DD: refused for catalogs created after this day
    source: str = "--trust"  # where the rule came from, for messages


@dataclass
class Trust:
    keys: list = field(default_factory=list)  # [TrustedKey]

    def __bool__(self) -> bool:
        return bool(self.keys)

    def fingerprints(self) -> list[str]:
        return sorted({k.fingerprint for k in self.keys})


def load_key(path: Path, source: str = "--trust", retired_from_version: Optional[str] = None,
             not_after: Optional[str] = None) -> TrustedKey:
    try:
        pem = Path(path).read_bytes()
    except OSError as exc:
        raise TrustError(f"cannot read the trusted key {path} ({source}): {exc.strerror or exc}") from None
    try:
        fp = fingerprint(pem)
    except TrustError as exc:
        raise TrustError(f"the trusted key {path} ({source}) is {exc}") from None
    return TrustedKey(Path(path), fp, retired_from_version, not_after, source)


def load_trust_config(path: Path) -> list[TrustedKey]:
    """`{"keys": [{"path": "a.pub", "retired_from_version": "2.0.0", "not_after": "2027-06-30"}, ...]}`; paths
    relative to the file's folder."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise TrustError(f"cannot read the trust config {path}: {exc}") from None
    if not isinstance(doc, dict) or set(doc) != {"keys"} or not isinstance(doc["keys"], list) or not doc["keys"]:
        raise TrustError(f"the trust config {path} must be an object with one entry, \"keys\": a non-empty list")
    keys = []
    for i, entry in enumerate(doc["keys"]):
        where = f"{path}: keys[{i}]"
        allowed = {"path", "retired_from_version", "not_after"}
        if not isinstance(entry, dict) or "path" not in entry or set(entry) - allowed:
            raise TrustError(f"{where} must have \"path\" and may have only {sorted(allowed - {'path'})}")
        retired, not_after = entry.get("retired_from_version"), entry.get("not_after")
        if retired is not None:
            try:
                version_key(str(retired))
            except ValueError:
                raise TrustError(f"{where}: retired_from_version {retired!r} is not a version like 1.2.0") from None
        if not_after is not None:
            try:
                datetime.date.fromisoformat(str(not_after))
            except ValueError:
                raise TrustError(f"{where}: not_after {not_after!r} is not a date like 2027-06-30") from None
        keys.append(load_key(Path(path).parent / entry["path"], f"trust config {path}", retired, not_after))
    return keys


def load_trust(keys: Optional[list] = None, configs: Optional[list] = None,
               environ: Optional[dict] = None) -> Trust:
    """The keys given on the command line; only when none is given, those of FARM_TRUST and FARM_TRUST_CONFIG."""
    keys, configs = list(keys or []), list(configs or [])
    if not keys and not configs:
        environ = os.environ if environ is None else environ
        keys = [p for p in environ.get(TRUST_ENV, "").split(os.pathsep) if p]
        configs = [p for p in environ.get(TRUST_CONFIG_ENV, "").split(os.pathsep) if p]
        key_source, config_source = f"{TRUST_ENV}", f"{TRUST_CONFIG_ENV}"
    else:
        key_source, config_source = "--trust", "--trust-config"
    trusted = [load_key(Path(p), key_source) for p in keys]
    for config in configs:
        try:
            trusted += load_trust_config(Path(config))
        except TrustError as exc:
            raise TrustError(f"{exc} ({config_source})") from None
    return Trust(trusted)


# ---- a release, as its tag holds it ----

@dataclass
class Release:
    tag: str
    catalog: bytes  # artifacts/catalog.json at the tag, exact bytes
    provenance: Optional[bytes]
    signature: Optional[bytes]
    message: str  # the tag's message ("" where unknown: an assets folder)


def read_release(repo: str, version: str) -> Release:
    """The catalog, provenance and signature committed at tag catalog/v<version>, and the tag's message, read
    with git alone (a local repository directly, a URL through one shallow clone of the tag)."""
    tag = tag_for(version)
    if Path(repo).is_dir():
        return _release_at(repo, tag, f"refs/tags/{tag}")
    with tempfile.TemporaryDirectory(prefix="farm-release.") as clone:
        try:
            git("clone", "--quiet", "--depth", "1", "--branch", tag, "--no-checkout", repo, clone)
        except GitError as exc:
            raise TrustError(f"cannot read the release of {version} from {_public(repo)}: {exc}") from None
        return _release_at(clone, tag, f"refs/tags/{tag}")


def _public(repo: str) -> str:
    parts = urlsplit(repo)
    return repo.replace(parts.netloc, parts.netloc.rsplit("@", 1)[1]) if parts.scheme and "@" in parts.netloc else repo


def _release_at(cwd: str, tag: str, ref: str) -> Release:
    try:
        listed = set(git("ls-tree", "-r", "--name-only", f"{ref}^{{commit}}", "--", RELEASE_DIR, cwd=cwd).split())
        catalog = git_bytes("show", f"{ref}^{{commit}}:{CATALOG_PATH}", cwd=cwd)

        def read(name: str) -> Optional[bytes]:
            path = f"{RELEASE_DIR}/{name}"
            return git_bytes("show", f"{ref}^{{commit}}:{path}", cwd=cwd) if path in listed else None

        message = git("for-each-ref", "--format=%(contents)", ref, cwd=cwd)
        return Release(tag, catalog, read(PROVENANCE), read(SIGNATURE), message)
    except GitError as exc:
        raise TrustError(f"cannot read the release at {tag}: {exc}") from None


def release_from_folder(folder: Path) -> Release:
    """A release folder as `pull --trust` writes it beside the files (catalog.json, provenance.json,
    signature.sig)."""
    def read(name: str) -> Optional[bytes]:
        return (folder / name).read_bytes() if (folder / name).is_file() else None

    catalog = read(CATALOG)
    if catalog is None:
        raise TrustError(f"{folder} has no {CATALOG}: not a release folder written by farm pull --trust")
    try:
        version = json.loads(catalog)["version"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise TrustError(f"{folder / CATALOG} is not a catalog: changed after it was pulled") from None
    return Release(tag_for(str(version)), catalog, read(PROVENANCE), read(SIGNATURE), "")


def write_release_folder(release: Release, folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / CATALOG).write_bytes(release.catalog)
    for name, data in ((PROVENANCE, release.provenance), (SIGNATURE, release.signature)):
        if data is not None:
            (folder / name).write_bytes(data)


# ---- verification ----

def key_hint(signature: bytes) -> Optional[str]:
    """The key id a model-signing bundle names (sha256 of the signer's public key PEM), or None."""
    try:
        bundle = json.loads(signature)
        hint = bundle["verificationMaterial"]["publicKey"].get("hint")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise TrustError("the signature is not a model-signing key bundle (a Sigstore bundle with a public key "
                         "id): corrupted or replaced") from None
    return hint if isinstance(hint, str) and re.fullmatch(r"[0-9a-f]{64}", hint) else None


def check_release(release: Release, trust: Trust, allow_unsigned: bool, version: Optional[str] = None) -> dict:
    """Verify `release` against the trusted keys; return what a sidecar records under "signature".

    Raises TrustError, one line each: an unsigned release (unless allow_unsigned), a tag that says signed
    without its signature, a key not trusted, a signature that does not verify or does not cover the catalog
    and provenance, a signed catalog of another version than the tag's, a key retired for this release."""
    what = f"catalog {version or release.tag}"
    if release.signature is None:
        said = SIGNED_LINE.search(release.message)
        if said:
            raise TrustError(f"{what}: the tag {release.tag} says it was signed by key {short(said[1])}, but it "
                             f"holds no {RELEASE_DIR}/{SIGNATURE}: the signature was removed after publishing")
        if not allow_unsigned:
            raise TrustError(f"{what} is unsigned (no {RELEASE_DIR}/{SIGNATURE} at {release.tag}): its publisher "
                             f"did not sign it, or someone without the key published it; pass --allow-unsigned to "
                             f"take it unverified")
        return {"verified": False, "release": release.tag, "reason": "the release is unsigned (--allow-unsigned)"}
    if not trust:
        if not allow_unsigned:
            raise TrustError(f"{what} is signed, and no key is trusted to verify it: pass --trust KEY.pub (or set "
                             f"{TRUST_ENV}) with the publisher's public key, or --allow-unsigned to take it "
                             f"unverified")
        return {"verified": False, "release": release.tag,
                "reason": "signed, but not verified: no --trust key given (--allow-unsigned)"}
    hint = key_hint(release.signature)
    candidates = [k for k in trust.keys if k.fingerprint == hint] if hint else list(trust.keys)
    if not candidates:
        raise TrustError(f"{what} is signed by an unknown key {short(hint)} (fingerprint {hint}); trusted: "
                         f"{', '.join(short(f) for f in trust.fingerprints())}: not signed by a publisher this "
                         f"build trusts")
    verifying, _ = _model_signing()
    failures = []
    with tempfile.TemporaryDirectory(prefix="farm-verify.") as tmp:
        folder, signature = Path(tmp) / "release", Path(tmp) / SIGNATURE
        write_release_folder(Release(release.tag, release.catalog, release.provenance, None, ""), folder)
        signature.write_bytes(release.signature)
        for key in {k.fingerprint: k for k in candidates}.values():
            config = verifying.Config().use_elliptic_key_verifier(public_key=key.path)
            config.set_hashing_config(hashing_config())
            try:
                config.verify(folder, signature)
            except ValueError as exc:
                text = str(exc)
                if text.startswith("Signature mismatch"):
                    raise TrustError(f"{what}: the signature of key {short(key.fingerprint)} does not cover what "
                                     f"{release.tag} holds ({_mismatch(release.signature, folder)}): the catalog "
                                     f"or provenance was "
                                     f"changed after signing, or another release's signature was copied in"
                                     ) from None
                failures.append((key, text.splitlines()[0] if text else type(exc).__name__))
                continue
            except Exception as exc:  # noqa: BLE001 (cryptography's InvalidSignature, a malformed bundle)
                failures.append((key, type(exc).__name__))
                continue
            break
        else:
            named = "; ".join(f"{short(k.fingerprint)}: {why}" for k, why in failures)
            raise TrustError(f"{what}: the signature does not verify with the trusted key ({named}): it was forged "
                             f"or corrupted")
    try:
        catalog = check_catalog(json.loads(release.catalog))
    except (ValueError, RecursionError) as exc:  # CatalogError is a ValueError
        raise TrustError(f"{what}: the signed catalog at {release.tag} is not one the client can use: "
                         f"{exc if isinstance(exc, CatalogError) else 'not JSON'}") from None
    if version is not None and catalog.get("version") != version:
        raise TrustError(f"{what}: {release.tag} holds a signed catalog of version {catalog.get('version')}, not "
                         f"{version}: a signed release replayed under another tag")
    retired(key, catalog, trust)
    return {"verified": True, "release": release.tag, "key": key.fingerprint,
            "signature_sha256": hashlib.sha256(release.signature).hexdigest()}


def signature_line(signature: dict) -> str:
    """What `show`, `select` and `pull` print of check_release's record (with a pull's release folder)."""
    if signature["verified"]:
        return (f"signature: verified, {signature['release']} signed by key {short(signature['key'])}"
                + (f"; release folder {signature['release_folder']}" if signature.get("release_folder") else ""))
    return f"signature: NOT verified: {signature['reason']}"


def _mismatch(signature: bytes, folder: Path) -> str:
    """What the (verified) signature's manifest says against what `folder` holds, file by file."""
    try:
        envelope = json.loads(signature)["dsseEnvelope"]
        statement = json.loads(base64.b64decode(envelope["payload"]))
        signed = {r["name"]: r["digest"] for r in statement["predicate"]["resources"]}
    except (ValueError, KeyError, TypeError):
        return "its manifest is unreadable"
    held = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    said = [f"{name}: signed sha256 {signed[name][:12]}, holds {held[name][:12]}"
            for name in sorted(set(signed) & set(held)) if signed[name] != held[name]]
    said += [f"{name} signed but missing" for name in sorted(set(signed) - set(held))]
    said += [f"{name} not signed" for name in sorted(set(held) - set(signed))]
    return "; ".join(said) or "the manifest differs"


def retired(key: TrustedKey, catalog: dict, trust: Trust) -> None:
    """Every rule given for the key that signed: refused if any applies to this catalog."""
    for rule in (k for k in trust.keys if k.fingerprint == key.fingerprint):
        version = str(catalog.get("version"))
        if rule.retired_from_version and version_key(version) >= version_key(rule.retired_from_version):
            raise TrustError(f"catalog {version} is signed by key {short(key.fingerprint)} ({rule.path}), which "
                             f"{rule.source} retires from version {rule.retired_from_version}: releases from "
                             f"{rule.retired_from_version} on must be signed by a newer key")
        created = str(catalog.get("created", ""))[:10]
        if rule.not_after and created > rule.not_after:
            raise TrustError(f"catalog {version} is signed by key {short(key.fingerprint)} ({rule.path}), which "
                             f"{rule.source} does not trust after {rule.not_after}: the signed catalog was created "
                             f"{catalog.get('created')}")
