"""`farm pull`: a file of a verified catalog into an app's folder, step by step: verify the release (catalog.py),
choose the file (choice.py), download it through DVC (remote.py), check its sha256 against the signed catalog,
write its sidecar (sidecars.py), place both atomically (staging.py). Or a Play AI pack of a cell's NPU files."""

from __future__ import annotations

from pathlib import Path

from da3_litert_farm.client import npu_files
from da3_litert_farm.client.catalog import PullError, pullable_catalog
from da3_litert_farm.client.choice import choose, choose_bundle
from da3_litert_farm.client.remote import RemoteError, download
from da3_litert_farm.client.sidecars import (bundle_file_name, bundle_sidecar, model_file_name, release_folder_name,
                                             sidecar)
from da3_litert_farm.client.staging import (check_space, free_bytes, no_space, place, place_folder, recover_staging,
                                            staging_folder)
from da3_litert_farm.client.trust import Trust, signature_line, write_release_folder
from da3_litert_farm.core import fileio
from da3_litert_farm.core.releases import tag_for

def pull(repo: str, version: str, out: Path, aspect: str | None = None, camera: tuple[int, int] | None = None,
         remote: str | None = None, bundle: bool = False, allow_stress: bool = False, trust: Trust | None = None,
         allow_unsigned: bool = False, long_side: int | None = None, max_gmac: float | None = None,
         model: str | None = None, soc: str | None = None) -> tuple[Path, str]:
    """Verify the release's signature, download, check the file's sha256, then place the model (or the bundle of
    `model` at tier `long_side`) and its sidecar in `out` (and, when verified, the release folder). Returns (model
    path, reason)."""
    if bundle and max_gmac is not None:
        raise PullError("--max-gmac chooses one file for a --camera; --bundle holds every aspect of one tier "
                        "(--long-side names the tier)")
    if bundle and soc:
        raise PullError("--soc picks one cell's file compiled for that chip's NPU; a bundle is for the GPU (docs/npu.md: "
                        "bundles): pull with --camera or --aspect")
    catalog, signature, release = pullable_catalog(repo, version, trust, allow_unsigned, allow_stress)
    if bundle:
        entry, reason = choose_bundle(catalog, model, long_side)
        name = bundle_file_name(catalog, entry)
        document = bundle_sidecar(catalog, repo, name, entry["bundle"])
    else:
        entry, reason = choose(catalog, aspect, camera, long_side, max_gmac, model)
        name = model_file_name(catalog, entry)
        target, why = npu_files.for_chip(entry, soc) if soc else (None, None)
        reason = f"{reason}\n{why}" if why else reason
        if target is not None:
            name = npu_files.npu_file_name(catalog, entry, target["soc"])
        document = sidecar(catalog, entry, repo, reason, name, target)
        entry = npu_files.as_file(entry, target) if target else entry  # the file to download and check
    release_dir = release_folder_name(catalog) if signature["verified"] else None
    document["signature"] = {**signature, **({"release_folder": release_dir} if release_dir else {})}
    if out.is_dir():
        recover_staging(out)  # what a killed pull left: completed or rolled back, its staging folder removed
    needed = check_space(out, name, entry["bytes"])
    with staging_folder(out, name, needed) as staging:
        staged = staging / name
        try:
            download(entry["file"], repo, tag_for(version), remote, staged)
        except RemoteError as exc:
            free = free_bytes(out) + (staged.stat().st_size if staged.exists() else 0)  # once the part is removed
            if free < needed:  # the disk filled up under the download (the write failed with ENOSPC)
                raise no_space(out, name, needed, free) from None
            raise PullError(f"cannot download {entry['file']} of catalog {version}: {exc}") from None
        digest = fileio.sha256_file(staged)
        if digest != entry["sha256"]:
            raise PullError(f"sha256 mismatch for {entry['file']} (catalog {version}): downloaded {digest}, "
                            f"catalog says {entry['sha256']}; the remote copy is corrupt or tampered. "
                            f"{out} was left untouched")
        staged_sidecar = staging / f"{name}.json"
        fileio.write_json(staged_sidecar, document)
        if release_dir:  # beside the files, for `farm verify`; placed first, so a sidecar never lacks it
            write_release_folder(release, staging / release_dir)
            place_folder(staging / release_dir, out, staging / f"{release_dir}.old")
        place(staged, staged_sidecar, out)
    return out / name, reason


def pull_ai_pack(repo: str, version: str, out: Path, aspect: str | None, camera: tuple[int, int] | None,
                 remote: str | None, allow_stress: bool, trust: Trust | None, allow_unsigned: bool,
                 long_side: int | None, max_gmac: float | None, model: str | None) -> str:
    """Write a Play AI pack of the chosen cell into `out` (the pack's own folder, replaced whole on success and left
    as it was on any failure): each phone chip's NPU file in its device group, the GPU file for every other device,
    device_targeting_configuration.xml, the pack module's build.gradle.kts and ai-pack.json (what each file is).
    Every file's sha256 is checked against the verified catalog before anything is placed."""
    catalog, signature, _ = pullable_catalog(repo, version, trust, allow_unsigned, allow_stress)
    entry, reason = choose(catalog, aspect, camera, long_side, max_gmac, model)
    socs = npu_files.phone_chips(entry)
    if not socs:
        raise PullError(f"cell {entry['cell']} of catalog {version} has no file compiled for a phone's NPU (the farm's "
                        f"npu.targets), so an AI pack would hold the GPU file alone: pull that without --ai-pack")
    pack = npu_files.ai_pack_name(catalog, entry)
    layout = npu_files.ai_pack_layout(pack, socs)  # path -> chip (None: the GPU file)
    files = {path: npu_files.as_file(entry, entry["npu"]["targets"][soc]) if soc else entry
             for path, soc in layout.items()}
    check_space(out, pack, sum(f["bytes"] for f in files.values()))
    with fileio.atomic_dir(out) as staging:
        for path, f in files.items():
            staged = staging / path
            staged.parent.mkdir(parents=True, exist_ok=True)
            try:
                download(f["file"], repo, tag_for(version), remote, staged)
            except RemoteError as exc:
                raise PullError(f"cannot download {f['file']} of catalog {version}: {exc}") from None
            if (digest := fileio.sha256_file(staged)) != f["sha256"]:
                raise PullError(f"sha256 mismatch for {f['file']} (catalog {version}): downloaded {digest}, catalog "
                                f"says {f['sha256']}; the remote copy is corrupt or tampered. {out} was left untouched")
        (staging / "device_targeting_configuration.xml").write_text(npu_files.targeting_config(socs))
        (staging / pack / "build.gradle.kts").write_text(npu_files.ai_pack_gradle(pack))
        fileio.write_json(staging / "ai-pack.json", {"pack": pack, "selected": reason, "signature": signature, "groups": {
            path: sidecar(catalog, entry, repo, reason, Path(path).name, entry["npu"]["targets"][soc] if soc else None)
            for path, soc in layout.items()}})
    return f"{reason}\n{npu_files.describe_pack(out, pack, socs)}\n{signature_line(signature)}"
