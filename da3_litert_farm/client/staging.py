"""Writing pulled files into an app's folder so that a failure or a kill never leaves it half written: the free
space checked first, everything staged in a hidden folder inside it, then placed by atomic renames; and the
recovery of what a pull killed outright left there (docs/reliability.md)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from da3_litert_farm.client.catalog import PullError
from da3_litert_farm.core import fileio

STAGING = ".farm-pull."  # + the pulling process's id + a random part
# Room for the sidecar and the release folder, beside the model's bytes.
SPACE_MARGIN = 1 << 20


def free_bytes(out: Path) -> int:
    """Free bytes on the disk that holds `out` (or would hold it)."""
    return shutil.disk_usage(next(f for f in (out.absolute(), *out.absolute().parents) if f.exists())).free


def no_space(out: Path, name: str, needed: int, free: int) -> PullError:
    return PullError(f"not enough space in {out} for {name}: it needs {needed / 1e6:.1f} MB, the disk holding it has "
                     f"{free / 1e6:.1f} MB free (the file is staged there whole before it is moved into place); free "
                     f"some space or pull into a folder on a roomier disk. {out} was left untouched")


def check_space(out: Path, name: str, size: int) -> int:
    """The bytes a pull of `size` bytes into `out` needs (SPACE_MARGIN more); refused when the disk has fewer."""
    needed = size + SPACE_MARGIN
    if free_bytes(out) < needed:
        raise no_space(out, name, needed, free_bytes(out))
    return needed


@contextlib.contextmanager
def staging_folder(out: Path, name: str, needed: int) -> Iterator[Path]:
    """A hidden folder inside `out` to stage a pull of `name` in, removed when done.

    Inside `out`: a sandboxed build step may write only there, and placing is then a rename on the same
    filesystem. `out` is removed again on failure if this pull created it. The folder's name holds this
    process's id, so that a later pull can tell a killed pull's folder from a running one's. A full disk
    (ENOSPC) is named as such.
    """
    created = _missing_folders(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix=f"{STAGING}{os.getpid()}.", dir=out) as staging:
            yield Path(staging)
    except BaseException as exc:
        for folder in created:  # deepest first; each is empty again once staging is gone
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise no_space(out, name, needed, free_bytes(out)) from None
        raise


def _missing_folders(out: Path) -> list[Path]:
    """`out` and those of its parents that do not exist yet, deepest first."""
    missing = []
    for folder in (out.absolute(), *out.absolute().parents):
        if folder.exists():
            break
        missing.append(folder)
    return missing


def place(model: Path, model_sidecar: Path, out: Path) -> None:
    """Move a verified model and its sidecar into `out` so that no reader can pair them wrongly.

    Each step is one atomic rename: the old sidecar goes (aside, into the staging folder), the
    model is replaced, the new sidecar arrives. In between, the model has no sidecar, never
    another version's; if the pull is killed there, the next pull into `out` puts back the
    sidecar that describes the model it finds (recover_staging).
    """
    with contextlib.suppress(FileNotFoundError):
        os.replace(out / model_sidecar.name, model.parent / f"{model_sidecar.name}.old")
    os.replace(model, out / model.name)
    os.replace(model_sidecar, out / model_sidecar.name)


def place_folder(folder: Path, out: Path, trash: Path) -> None:
    """Move a release folder into `out`, replacing one of the same name (the same tag's, so the same files)."""
    target = out / folder.name
    if target.exists():
        os.replace(target, trash)
    os.replace(folder, target)


def recover_staging(out: Path) -> None:
    """Finish what pulls killed mid-way left in `out` (SIGKILL or a power cut skip every cleanup): put back a
    sidecar that describes the model in `out` where that model has none, then remove their staging folders.
    A running pull's folder is left alone."""
    for staging in sorted(out.glob(f"{STAGING}*")):
        owner = re.match(rf"{re.escape(STAGING)}(\d+)\.", staging.name)
        if owner is None or _running(int(owner[1])):
            continue  # an older client's folder, or a pull still at work
        for saved in sorted(staging.glob("*.tflite.json*")):  # the new sidecar, and the old one (.old) if set aside
            target = out / saved.name.removesuffix(".old")
            model = target.with_name(target.name.removesuffix(".json"))
            if saved.is_file() and model.is_file() and not target.exists() and _describes(saved, model):
                os.replace(saved, target)
        for aside in staging.glob("*.release.old"):  # a release folder set aside: the same tag's files
            if not (out / aside.name.removesuffix(".old")).exists():
                os.replace(aside, out / aside.name.removesuffix(".old"))
        shutil.rmtree(staging, ignore_errors=True)


def _running(pid: int) -> bool:
    """Whether process `pid` exists. Where that cannot be asked safely (Windows: os.kill would end it), yes."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _describes(sidecar_path: Path, model: Path) -> bool:
    try:
        return json.loads(sidecar_path.read_text())["sha256"] == fileio.sha256_file(model)
    except (ValueError, KeyError, TypeError, OSError):
        return False
