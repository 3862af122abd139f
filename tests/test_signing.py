"""Trust, with real keys and real model-signing signatures: the publisher's key pair, a release signed and
verified, each refusal, key rotation, and `farm verify` on an assets folder. No farm is built here; publishing
and pulling a signed release through real remotes is in tests/test_publish_pull.py."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from da3_litert_farm.client import cli, sidecars
from da3_litert_farm.client.pull import pull
from da3_litert_farm.client.trust import (PROVENANCE, SIGNATURE, Release, Trust, TrustError, check_release,
                                          fingerprint, load_key, load_trust, short, write_release_folder)
from da3_litert_farm.client.verify import verify_assets
from da3_litert_farm.core.fileio import sha256_file
from da3_litert_farm.ops import signing
from da3_litert_farm.ops.signing import SigningError, make_keys, provenance, sign_release, signing_key
from tests.test_client import catalog as client_catalog


def keys(tmp_path: Path, name: str) -> tuple[Path, Path]:
    private = tmp_path / name / f"{name}.pem"
    return private, make_keys(private)


def catalog(version: str = "1.0.0", created: str = "2026-12-05T00:00:00Z") -> dict:
    doc = client_catalog()
    doc.update(version=version, created=created)
    return doc


def release(doc: dict, private: Path | None, tmp_path: Path, statement: dict | None = None) -> Release:
    """`doc` as a tag holds it once published: signed with `private` (None: unsigned)."""
    data = (json.dumps(doc, indent=2) + "\n").encode()
    tag = f"catalog/v{doc['version']}"
    if private is None:
        return Release(tag, data, None, None, f"{doc['name']} {doc['version']}\n\nunsigned: published with --unsigned")
    out = tmp_path / f"signed-{doc['version']}-{private.stem}"
    files = sign_release(data, statement or provenance(doc, "c0ffee" * 6 + "abcd", {"aspects": {}}), private, out)
    fp = signing_key(private)[1]
    return Release(tag, data, files[PROVENANCE], files[SIGNATURE], f"{doc['name']}\n\nsigned by key {fp} (...)")


def trusting(*public: Path) -> Trust:
    return Trust([load_key(p) for p in public])


@pytest.fixture(scope="module")
def publisher(tmp_path_factory):
    return keys(tmp_path_factory.mktemp("publisher"), "publisher")


@pytest.fixture(scope="module")
def attacker(tmp_path_factory):
    return keys(tmp_path_factory.mktemp("attacker"), "attacker")


# ---- the publisher's key ----

def test_make_keys_writes_a_private_key_only_its_owner_reads_and_never_overwrites(tmp_path):
    private = tmp_path / "config" / "publisher.pem"
    public = make_keys(private)
    assert public == tmp_path / "config" / "publisher.pub"
    assert private.stat().st_mode & 0o777 == 0o600
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert signing_key(private)[1] == fingerprint(public.read_bytes())
    before = private.read_bytes(), public.read_bytes()
    with pytest.raises(SigningError, match=r"publisher.pem exists; a publisher key is never overwritten"):
        make_keys(private)
    public.rename(tmp_path / "elsewhere.pub")
    (tmp_path / "config" / "other.pub").write_text("x")
    with pytest.raises(SigningError, match=r"other.pub exists"):  # the public half alone is enough to refuse
        make_keys(tmp_path / "config" / "other.pem")
    assert private.read_bytes() == before[0] and not (tmp_path / "config" / "other.pem").exists()


def test_make_keys_command_writes_at_farm_signing_key_and_prints_the_public_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FARM_SIGNING_KEY", str(tmp_path / "k" / "team.pem"))
    assert signing.main(["keys"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "k" / "team.pub") in out and "mode 0600" in out
    assert signing.main(["keys"]) == 1
    assert "team.pem exists" in capsys.readouterr().err


def test_the_default_key_lives_outside_the_checkout(monkeypatch):
    monkeypatch.delenv("FARM_SIGNING_KEY", raising=False)
    assert signing.key_path() == Path.home() / ".config" / "da3-litert-farm" / "publisher.pem"


def test_publishing_without_a_key_names_both_ways_to_get_one(tmp_path):
    with pytest.raises(SigningError, match=r"no publisher key at .*missing.pem: `make keys` writes a new pair "
                                           r"there, or set FARM_SIGNING_KEY .*ARGS=--unsigned"):
        signing_key(tmp_path / "missing.pem")
    (tmp_path / "rsa.pem").write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    with pytest.raises(SigningError, match=r"rsa.pem is not an unencrypted PEM private key"):
        signing_key(tmp_path / "rsa.pem")


# ---- signed and verified ----

def test_a_signed_release_verifies_against_its_publishers_key(tmp_path, publisher):
    private, public = publisher
    signed = release(catalog(), private, tmp_path)
    result = check_release(signed, trusting(public), allow_unsigned=False, version="1.0.0")
    assert result["verified"] is True and result["release"] == "catalog/v1.0.0"
    assert result["key"] == fingerprint(public.read_bytes()) == signing_key(private)[1]
    statement = json.loads(signed.provenance)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert [(s["name"], s["digest"]["sha256"]) for s in statement["subject"]] == [
        (f"da3-small-litert-{m['cell']}", m["sha256"]) for m in catalog()["models"]]
    deps = {d["name"]: d["digest"] for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]}
    assert deps == {"code": {"gitCommit": "c0ffee" * 6 + "abcd"}, "checkpoint small": {"sha256": "ab" * 32}}
    assert statement["predicate"]["runDetails"]["builder"]["version"] == catalog()["tools"]


def test_a_signature_without_its_key_id_is_tried_with_every_trusted_key(tmp_path, publisher, attacker):
    signed = release(catalog(), publisher[0], tmp_path)
    bundle = json.loads(signed.signature)
    del bundle["verificationMaterial"]["publicKey"]["hint"]
    stripped = Release(signed.tag, signed.catalog, signed.provenance, json.dumps(bundle).encode(), signed.message)
    assert check_release(stripped, trusting(attacker[1], publisher[1]), False, "1.0.0")["verified"] is True


# ---- each refusal ----

def test_an_unsigned_release_is_refused_unless_allowed(tmp_path, publisher):
    unsigned = release(catalog(), None, tmp_path)
    with pytest.raises(TrustError, match=r"^catalog 1.0.0 is unsigned \(no artifacts/release/signature.sig at "
                                         r"catalog/v1.0.0\).*pass --allow-unsigned"):
        check_release(unsigned, trusting(publisher[1]), allow_unsigned=False, version="1.0.0")
    assert check_release(unsigned, trusting(publisher[1]), allow_unsigned=True, version="1.0.0") == {
        "verified": False, "release": "catalog/v1.0.0", "reason": "the release is unsigned (--allow-unsigned)"}


def test_a_signed_release_needs_a_trusted_key_or_allow_unsigned(tmp_path, publisher):
    signed = release(catalog(), publisher[0], tmp_path)
    with pytest.raises(TrustError, match=r"catalog 1.0.0 is signed, and no key is trusted to verify it: pass "
                                         r"--trust KEY.pub \(or set FARM_TRUST\)"):
        check_release(signed, Trust(), allow_unsigned=False, version="1.0.0")
    assert check_release(signed, Trust(), allow_unsigned=True, version="1.0.0")["reason"] == (
        "signed, but not verified: no --trust key given (--allow-unsigned)")


def test_a_release_signed_by_another_key_is_refused_naming_both_keys(tmp_path, publisher, attacker):
    forged = release(catalog(), attacker[0], tmp_path)
    theirs, ours = signing_key(attacker[0])[1], signing_key(publisher[0])[1]
    with pytest.raises(TrustError, match=rf"catalog 1.0.0 is signed by an unknown key {short(theirs)} \(fingerprint "
                                         rf"{theirs}\); trusted: {short(ours)}"):
        check_release(forged, trusting(publisher[1]), allow_unsigned=True, version="1.0.0")  # allow: no help


def test_a_catalog_changed_after_signing_is_not_covered(tmp_path, publisher):
    signed = release(catalog(), publisher[0], tmp_path)
    doc = json.loads(signed.catalog)
    doc["models"][0]["sha256"] = "ee" * 32  # the attacker's file, with its own correct sha256
    changed = Release(signed.tag, json.dumps(doc, indent=2).encode() + b"\n", signed.provenance, signed.signature,
                      signed.message)
    with pytest.raises(TrustError, match=r"catalog 1.0.0: the signature of key \w{16} does not cover what "
                                         r"catalog/v1.0.0 holds \(catalog.json: signed sha256 \w{12}, holds "
                                         r"\w{12}\): the catalog or provenance was changed after signing"):
        check_release(changed, trusting(publisher[1]), False, "1.0.0")


def test_a_signature_of_another_release_is_not_covered_nor_is_a_missing_provenance(tmp_path, publisher):
    older = release(catalog("0.9.0"), publisher[0], tmp_path)
    newer = release(catalog("1.0.0"), publisher[0], tmp_path)
    copied = Release(newer.tag, newer.catalog, newer.provenance, older.signature, newer.message)
    with pytest.raises(TrustError, match=r"does not cover what catalog/v1.0.0 holds \(catalog.json: signed sha256 "
                                         r"\w{12}, holds \w{12}; provenance.json: signed sha256 \w{12}, holds "
                                         r"\w{12}\)"):
        check_release(copied, trusting(publisher[1]), False, "1.0.0")
    without = Release(newer.tag, newer.catalog, None, newer.signature, newer.message)
    with pytest.raises(TrustError, match=r"does not cover .*\(provenance.json signed but missing\)"):
        check_release(without, trusting(publisher[1]), False, "1.0.0")


def test_a_forged_or_corrupted_signature_does_not_verify(tmp_path, publisher):
    signed = release(catalog(), publisher[0], tmp_path)
    bundle = json.loads(signed.signature)
    raw = bytearray(base64.b64decode(bundle["dsseEnvelope"]["signatures"][0]["sig"]))
    raw[-1] ^= 0x01
    bundle["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()
    corrupted = Release(signed.tag, signed.catalog, signed.provenance, json.dumps(bundle).encode(), signed.message)
    with pytest.raises(TrustError, match=r"catalog 1.0.0: the signature does not verify with the trusted key "
                                         r"\(\w{16}: InvalidSignature\): it was forged or corrupted"):
        check_release(corrupted, trusting(publisher[1]), False, "1.0.0")
    garbage = Release(signed.tag, signed.catalog, signed.provenance, b"{not json", signed.message)
    with pytest.raises(TrustError, match=r"the signature is not a model-signing key bundle"):
        check_release(garbage, trusting(publisher[1]), False, "1.0.0")


def test_a_tag_that_says_signed_without_its_signature_is_refused_even_when_unsigned_is_allowed(tmp_path, publisher):
    signed = release(catalog(), publisher[0], tmp_path)
    stripped = Release(signed.tag, signed.catalog, signed.provenance, None, signed.message)
    with pytest.raises(TrustError, match=rf"the tag catalog/v1.0.0 says it was signed by key "
                                         rf"{short(signing_key(publisher[0])[1])}, but it holds no "
                                         rf"artifacts/release/signature.sig: the signature was removed"):
        check_release(stripped, trusting(publisher[1]), allow_unsigned=True, version="1.0.0")


def test_a_signed_release_replayed_under_another_tag_is_refused(tmp_path, publisher):
    old = release(catalog("1.0.0"), publisher[0], tmp_path)
    replayed = Release("catalog/v2.0.0", old.catalog, old.provenance, old.signature, old.message)
    with pytest.raises(TrustError, match=r"catalog/v2.0.0 holds a signed catalog of version 1.0.0, not 2.0.0: a "
                                         r"signed release replayed under another tag"):
        check_release(replayed, trusting(publisher[1]), False, "2.0.0")


def test_verifying_without_the_verify_extra_says_which_extra(tmp_path, publisher, monkeypatch):
    monkeypatch.setitem(sys.modules, "model_signing", None)  # import model_signing now raises ImportError
    with pytest.raises(TrustError, match=r'needs model-signing, which this install lacks: pip install '
                                         r'"da3-litert-farm\[verify\]"'):
        load_trust([publisher[1]])


# ---- rotation ----

def write_config(tmp_path: Path, entries: list[dict]) -> Path:
    path = tmp_path / "trust.json"
    path.write_text(json.dumps({"keys": entries}))
    return path


def test_a_key_retired_from_a_version_signs_older_releases_only(tmp_path, publisher, attacker):
    old, new = publisher, attacker  # two keys of the same team, in turn
    for private, public in (old, new):
        (tmp_path / public.name).write_bytes(public.read_bytes())
    config = write_config(tmp_path, [{"path": old[1].name, "retired_from_version": "2.0.0"}, {"path": new[1].name}])
    trust = load_trust(configs=[str(config)])
    assert check_release(release(catalog("1.9.9"), old[0], tmp_path), trust, False, "1.9.9")["verified"]
    assert check_release(release(catalog("2.0.0"), new[0], tmp_path), trust, False, "2.0.0")["verified"]
    for version in ("2.0.0", "2.0.0-rc.1", "10.0.0"):
        if version == "2.0.0-rc.1":  # a prerelease of 2.0.0 sorts before it: still the old key's
            assert check_release(release(catalog(version), old[0], tmp_path), trust, False, version)["verified"]
            continue
        with pytest.raises(TrustError, match=rf"catalog {version} is signed by key {short(fingerprint(old[1].read_bytes()))} "
                                             rf"\(.*publisher.pub\), which trust config .*trust.json retires from "
                                             rf"version 2.0.0: releases from 2.0.0 on must be signed by a newer key"):
            check_release(release(catalog(version), old[0], tmp_path), trust, False, version)


def test_a_key_not_trusted_after_a_date_is_refused_for_catalogs_created_later(tmp_path, publisher):
    (tmp_path / "p.pub").write_bytes(publisher[1].read_bytes())
    trust = load_trust(configs=[str(write_config(tmp_path, [{"path": "p.pub", "not_after": "2026-12-31"}]))])
    ok = release(catalog(created="2026-12-31T23:59:59Z"), publisher[0], tmp_path)
    assert check_release(ok, trust, False, "1.0.0")["verified"]
    late = release(catalog("1.0.1", created="2027-01-01T00:00:00Z"), publisher[0], tmp_path)
    with pytest.raises(TrustError, match=r"catalog 1.0.1 is signed by key \w{16} \(.*p.pub\), which trust config "
                                         r".* does not trust after 2026-12-31: the signed catalog was created "
                                         r"2027-01-01T00:00:00Z"):
        check_release(late, trust, False, "1.0.1")


def test_rules_for_a_key_apply_however_often_it_is_listed(tmp_path, publisher):
    (tmp_path / "p.pub").write_bytes(publisher[1].read_bytes())
    config = write_config(tmp_path, [{"path": "p.pub"}, {"path": "p.pub", "retired_from_version": "1.0.0"}])
    trust = load_trust(configs=[str(config)])
    with pytest.raises(TrustError, match="retires from version 1.0.0"):
        check_release(release(catalog("1.0.0"), publisher[0], tmp_path), trust, False, "1.0.0")


@pytest.mark.parametrize("entry, message", [
    ({"path": "p.pub", "retired_from_version": "two"}, r"retired_from_version 'two' is not a version like 1.2.0"),
    ({"path": "p.pub", "not_after": "next year"}, r"not_after 'next year' is not a date like 2027-06-30"),
    ({"path": "p.pub", "retired_after": "1.0.0"}, r"keys\[0\] must have \"path\" and may have only"),
    ({"path": "missing.pub"}, r"cannot read the trusted key .*missing.pub"),
])
def test_a_wrong_trust_config_is_named(tmp_path, publisher, entry, message):
    (tmp_path / "p.pub").write_bytes(publisher[1].read_bytes())
    with pytest.raises(TrustError, match=message):
        load_trust(configs=[str(write_config(tmp_path, [entry]))])


def test_keys_come_from_the_command_line_else_from_the_environment(tmp_path, publisher, attacker):
    env = {"FARM_TRUST": f"{publisher[1]}{os.pathsep}{attacker[1]}"}
    assert load_trust(environ=env).fingerprints() == sorted(
        fingerprint(p.read_bytes()) for p in (publisher[1], attacker[1]))
    assert load_trust([str(attacker[1])], environ=env).fingerprints() == [fingerprint(attacker[1].read_bytes())]
    assert not load_trust(environ={})
    (tmp_path / "p.pub").write_bytes(publisher[1].read_bytes())
    config = write_config(tmp_path, [{"path": "p.pub", "retired_from_version": "1.0.0"}])
    assert load_trust(environ={"FARM_TRUST_CONFIG": str(config)}).keys[0].retired_from_version == "1.0.0"
    with pytest.raises(TrustError, match=r"the trusted key .*nope.pub \(FARM_TRUST\)"):
        load_trust(environ={"FARM_TRUST": str(tmp_path / "nope.pub")})


# ---- farm verify: an app's assets folder ----

@pytest.fixture
def assets(tmp_path, publisher):
    """An assets folder as `farm pull --trust` leaves it: a model, its sidecar, the release folder."""
    doc = catalog()
    model_bytes = os.urandom(4096)
    entry = doc["models"][1]  # 3x4
    entry.update(sha256=hashlib.sha256(model_bytes).hexdigest(), bytes=len(model_bytes), precision="fp16-weights",
                 input={"shape": [1, 3, 896, 672], "layout": "NCHW", "dtype": "float32",
                        "preprocessing": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}},
                 output={"shape": [1, 1, 896, 672], "layout": "NCHW", "dtype": "float32",
                         "meaning": "relative depth"})
    signed = release(doc, publisher[0], tmp_path)
    folder = tmp_path / "assets"
    write_release_folder(signed, folder / sidecars.release_folder_name(doc))
    name = sidecars.model_file_name(doc, entry)
    (folder / name).write_bytes(model_bytes)
    side = sidecars.sidecar(doc, entry, "git@example.com:ml/farm.git", "aspect 3x4 requested", name)
    side["signature"] = {"verified": True, "release": signed.tag}
    (folder / f"{name}.json").write_text(json.dumps(side, indent=2))
    (folder / "keep.txt").write_text("another asset of the app")
    return folder, folder / name, entry


def test_farm_verify_passes_on_pulled_assets_and_names_a_changed_file(assets, publisher, capsys):
    folder, model, entry = assets
    assert cli.main(["verify", str(folder), "--trust", str(publisher[1])]) == 0
    assert "verified 1 file and their sidecars" in capsys.readouterr().out
    data = bytearray(model.read_bytes())
    data[100] ^= 0x01
    model.write_bytes(bytes(data))
    with pytest.raises(TrustError, match=rf"^{model.name}: sha256 {sha256_file(model)} is not the signed catalog "
                                         rf"1.0.0's {entry['sha256']}: the file was changed after signing$"):
        verify_assets(folder, trusting(publisher[1]))
    assert cli.main(["verify", str(folder), "--trust", str(publisher[1])]) == 1
    assert f"farm verify: {model.name}: sha256" in capsys.readouterr().err


@pytest.mark.parametrize("edit, field", [
    (lambda s: s["input"].update(shape=[1, 3, 896, 673]), "input.shape.3"),
    (lambda s: s.update(aspect="9x16"), "aspect"),
    (lambda s: s["output"].update(meaning="metric depth"), "output.meaning"),
    (lambda s: s.update(sha256="0" * 64), "sha256"),
    (lambda s: s["fidelity"].update(pearson_min=0.99999999), "fidelity.pearson_min"),
    (lambda s: s.pop("warning"), "warning"),
])
def test_farm_verify_names_a_sidecar_field_changed_after_the_pull(assets, publisher, edit, field):
    folder, model, _ = assets
    side = model.with_name(f"{model.name}.json")
    doc = json.loads(side.read_text())
    edit(doc)
    side.write_text(json.dumps(doc, indent=2))
    with pytest.raises(TrustError, match=rf"^{side.name}: field {field} differs from the signed catalog 1.0.0"):
        verify_assets(folder, trusting(publisher[1]))


def test_farm_verify_refuses_what_it_cannot_check(assets, publisher, attacker, tmp_path):
    folder, model, _ = assets
    side = model.with_name(f"{model.name}.json")
    with pytest.raises(TrustError, match=r"signed by an unknown key"):
        verify_assets(folder, trusting(attacker[1]))
    with pytest.raises(TrustError, match=r"verify needs the publisher's public key"):
        verify_assets(folder, Trust())
    side.write_text(side.read_text().replace('"sidecar_version"', '"sidecar_version', 1))  # one byte gone
    with pytest.raises(TrustError, match=rf"{side.name} is not a sidecar any more"):
        verify_assets(folder, trusting(publisher[1]))
    side.unlink()
    with pytest.raises(TrustError, match=rf"{model.name} has no sidecar"):
        verify_assets(folder, trusting(publisher[1]))
    (release_dir,) = folder.glob("*.release")
    catalog_file = release_dir / "catalog.json"
    catalog_file.write_text(catalog_file.read_text().replace("2026-12-05", "2026-12-06"))
    with pytest.raises(TrustError, match=r"does not cover .*\(catalog.json: signed sha256"):
        verify_assets(folder, trusting(publisher[1]))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TrustError, match=r"holds no signed release folder"):
        verify_assets(empty, trusting(publisher[1]))


# ---- pull: verified before anything is written, from a repository's tag ----

def test_pull_verifies_the_tag_before_writing_and_leaves_the_release_folder_for_verify(tmp_path, publisher, attacker,
                                                                                      monkeypatch):
    """A git repository with two tags, one signed by the publisher and one by another key; DVC's part (the
    catalog's first read, the download) stands in, git and model-signing are real."""
    import subprocess

    repo = tmp_path / "farm"
    (repo / "artifacts").mkdir(parents=True)
    payload = os.urandom(2048)

    def tag(version: str, key: Path) -> None:
        doc = catalog(version)
        entry = doc["models"][1]
        entry.update(sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload), precision="fp16-weights",
                     input={"shape": [1, 3, 896, 672]}, output={"shape": [1, 1, 896, 672]})
        data = (json.dumps(doc, indent=2) + "\n").encode()
        (repo / "artifacts" / "catalog.json").write_bytes(data)
        sign_release(data, provenance(doc, "0" * 40, {}), key, repo / "artifacts" / "release")
        for args in (["add", "-A"], ["commit", "-qm", version], ["tag", "-a", f"catalog/v{version}", "-m", version]):
            subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True)

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    tag("1.0.0", publisher[0])
    tag("1.0.1", attacker[0])
    monkeypatch.setattr("da3_litert_farm.client.catalog.read_catalog", lambda repo, version: catalog(version))
    monkeypatch.setattr("da3_litert_farm.client.pull.download",
                        lambda path, repo, rev, remote, dest: dest.write_bytes(payload))

    refused = tmp_path / "refused" / "assets"
    with pytest.raises(TrustError, match=r"catalog 1.0.1 is signed by an unknown key"):
        pull(str(repo), "1.0.1", refused, aspect="3x4", trust=trusting(publisher[1]))
    assert not (tmp_path / "refused").exists()

    out = tmp_path / "app" / "assets"
    path, _ = pull(str(repo), "1.0.0", out, aspect="3x4", trust=trusting(publisher[1]))
    assert path.read_bytes() == payload
    side = json.loads(path.with_name(f"{path.name}.json").read_text())
    assert side["signature"]["verified"] is True and side["signature"]["key"] == signing_key(publisher[0])[1]
    assert sorted(p.name for p in out.iterdir()) == sorted([path.name, f"{path.name}.json",
                                                            "da3-small-litert-1.0.0.release"])
    assert "verified 1 file" in verify_assets(out, trusting(publisher[1]))
    again, _ = pull(str(repo), "1.0.0", out, aspect="3x4", trust=trusting(publisher[1]))  # replaces in place
    assert again == path and "verified 1 file" in verify_assets(out, trusting(publisher[1]))
