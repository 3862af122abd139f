"""The publisher's side of trust: its key pair, the release folder, its signature.

    make keys       (python -m da3_litert_farm.ops.signing keys)   a new P-256 pair at the key path

The private key never enters the repository: its path is FARM_SIGNING_KEY, else
~/.config/da3-litert-farm/publisher.pem; the public key is written beside it (`.pub`) for the app teams, who pin
it (`farm pull --trust KEY.pub`). `make publish` (da3_litert_farm/ops/publish.py) signs the release folder,
catalog.json and provenance.json, with OpenSSF model-signing in key mode and commits the signature and the
provenance under artifacts/release/; the client verifies them (da3_litert_farm/client/trust.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from da3_litert_farm.client.trust import (CATALOG, PROVENANCE, SIGNATURE, Release, TrustError, check_release,
                                          hashing_config, load_key, Trust, write_release_folder)
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.releases import tag_for
from da3_litert_farm.ops.catalog import shipped_files

KEY_ENV = "FARM_SIGNING_KEY"
DEFAULT_KEY = Path("~/.config/da3-litert-farm/publisher.pem")
RELEASE_DIR = Path("artifacts/release")
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:da3-litert-farm:make-farm:v1"


class SigningError(FarmError, RuntimeError):
    pass


def key_path(environ: dict | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ.get(KEY_ENV) or DEFAULT_KEY).expanduser()


def public_path(private: Path) -> Path:
    return private.with_suffix(".pub")


def make_keys(private: Path) -> Path:
    """A new P-256 key pair: the private key (PEM, PKCS#8, mode 0600) at `private`, the public key beside it
    (`.pub`); refuses to replace either. Returns the public key's path."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    public = public_path(private)
    for path in (private, public):
        if path.exists():
            raise SigningError(f"{path} exists; a publisher key is never overwritten (apps pin its public key). "
                               f"Move it away first, or point {KEY_ENV} at another path")
    key = ec.generate_private_key(ec.SECP256R1())
    private.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    os.chmod(private, 0o600)  # whatever the umask
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return public


def signing_key(path: Path) -> tuple[Path, str]:
    """(path, fingerprint) of the publisher's private key; refuses a missing or unusable one, naming the ways to
    get one."""
    if not path.is_file():
        raise SigningError(f"no publisher key at {path}: `make keys` writes a new pair there, or set {KEY_ENV} to "
                           f"the team's key; `make publish ARGS=--unsigned` publishes without a signature (the tag "
                           f"says unsigned, and apps that pin a key refuse it)")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), None)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{path} is not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name not in ("secp256r1", "secp384r1",
                                                                                "secp521r1"):
        raise SigningError(f"{path} is not a P-256, P-384 or P-521 key, which model-signing's key mode needs")
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return path, hashlib.sha256(pem).hexdigest()


def provenance(catalog: dict, commit: str, params: dict) -> dict:
    """An in-toto Statement v1 with a SLSA provenance v1 predicate: what was built (every shipped file and the
    bundle, by name and sha256), from what (the code commit, each model's checkpoint and its weights' sha256,
    params.yaml)
    and with which tools."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": m["sha256"]}, "annotations": {"file": m["file"]}}
                    for name, m in shipped_files(catalog).items()],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {"params": params, "catalog": {"name": catalog["name"],
                                                                     "version": catalog["version"]}},
                "resolvedDependencies": [
                    {"name": "code", "digest": {"gitCommit": commit}},
                    *({"name": f"checkpoint {model}", "digest": {"sha256": s["checkpoint"]["weights_sha256"]},
                       "annotations": s["checkpoint"]} for model, s in catalog["sources"].items()),
                ],
            },
            "runDetails": {
                "builder": {"id": BUILD_TYPE, "version": catalog["tools"]},
                "metadata": {"finishedOn": catalog["created"]},
            },
        },
    }


def sign_folder(folder: Path, private: Path, signature: Path) -> None:
    """model-signing, key mode: the manifest of every file's sha256 in `folder`, signed into `signature`."""
    try:
        from model_signing import signing
    except ImportError:
        raise SigningError('signing needs model-signing, which this venv lacks: make (or pip install '
                           '"da3-litert-farm[verify]")') from None
    signing.Config().use_elliptic_key_signer(private_key=private).set_hashing_config(hashing_config()).sign(
        folder, signature)


def sign_release(catalog_bytes: bytes, provenance_doc: dict, private: Path, out: Path) -> dict[str, bytes]:
    """Sign catalog.json + provenance.json with `private`; write provenance.json and signature.sig into `out`."""
    with tempfile.TemporaryDirectory(prefix="farm-sign.") as tmp:
        folder = Path(tmp) / "release"
        provenance_bytes = (json.dumps(provenance_doc, indent=2, sort_keys=True) + "\n").encode()
        write_release_folder(Release("", catalog_bytes, provenance_bytes, None, ""), folder)
        sign_folder(folder, private, Path(tmp) / SIGNATURE)
        signature = (Path(tmp) / SIGNATURE).read_bytes()
    out.mkdir(parents=True, exist_ok=True)
    (out / PROVENANCE).write_bytes(provenance_bytes)
    (out / SIGNATURE).write_bytes(signature)
    return {CATALOG: catalog_bytes, PROVENANCE: provenance_bytes, SIGNATURE: signature}


def signed_by(catalog_bytes: bytes, folder: Path, private: Path) -> dict | None:
    """The release already in `folder` when it verifies over `catalog_bytes` with `private`'s public key
    (a rerun of publish keeps it: signatures are randomised), else None."""
    if not (folder / SIGNATURE).is_file() or not (folder / PROVENANCE).is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="farm-sign.") as tmp:
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(private.read_bytes(), None)
        pub = Path(tmp) / "publisher.pub"
        pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
        release = Release(tag_for(json.loads(catalog_bytes)["version"]), catalog_bytes,
                          (folder / PROVENANCE).read_bytes(), (folder / SIGNATURE).read_bytes(), "")
        try:
            return check_release(release, Trust([load_key(pub)]), allow_unsigned=False)
        except TrustError:
            return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the publisher's signing key")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("keys", help=f"write a new P-256 key pair at {KEY_ENV} (default {DEFAULT_KEY})")
    args = parser.parse_args(argv)
    if args.command == "keys":
        private = key_path()
        try:
            public = make_keys(private)
        except (SigningError, OSError) as exc:
            print(f"keys: {exc}", file=sys.stderr)
            return 1
        _, fp = signing_key(private)
        print(f"keys: wrote the private key {private} (mode 0600; never commit it, back it up) and the public key\n"
              f"{public}\nfingerprint {fp}: give the public key to the app teams, who pin it with "
              f"`farm pull --trust {public.name}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
