"""Before `make publish` pushes: each shipped file's object in the DVC cache must hold the bytes dvc.lock records.

`dvc push` uploads cache objects as they are, without hashing them again, so one flipped bit in .dvc/cache
would reach the remote and every app pulling that version would be refused (the client checks sha256). With
DVC's default cache type (copy) the workspace file is a separate copy: when it is still the catalogued one,
the cache object is rewritten from it; when it is not, publish refuses and says to rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from da3_litert_farm.core import fileio, paths
from da3_litert_farm.ops.catalog import shipped
from da3_litert_farm.core.errors import FarmError

REBUILD = "run `dvc repro` (`make farm`) to rebuild it, then publish"


class CacheError(FarmError, RuntimeError):
    pass


def md5_of(path: Path) -> str | None:
    """The md5 DVC keys a file by (its bytes'), or None if there is no file."""
    digest = hashlib.md5()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def check_cache(files: list[str], error: type[Exception] = CacheError) -> list[str]:
    """Check (and repair from the workspace) the cache objects `dvc push` would upload for `files`; return what
    was repaired, also printed. Raises `error` (publish passes its PublishError) naming a file that cannot be."""
    from dvc.repo import Repo

    odb = Repo(".").cache.local
    outs = {o["path"]: o["md5"] for stage in yaml.safe_load(paths.LOCK_FILE.read_text())["stages"].values()
            for o in stage.get("outs", [])}
    catalog = json.loads(paths.CATALOG.read_text())
    catalogued = {m["file"]: m["sha256"] for m in shipped(catalog).values()}
    repaired: list[str] = []

    def check(oid: str, what: str, workspace: Callable[[], Path | bytes | None]) -> Path:
        """The cache object `oid` (an md5, `.dir` for a folder's manifest), rewritten from `workspace()` (those
        bytes, or None if the workspace copy is not good either) unless it already hashes to `oid`."""
        obj, want = Path(odb.oid_to_path(oid)), oid.removesuffix(".dir")
        got = md5_of(obj)
        if got == want:
            return obj
        state = "missing" if got is None else f"corrupt (md5 {got}, dvc.lock says {want})"
        source = workspace()
        if source is None:
            raise error(f"the DVC cache copy of {what} ({obj}) is {state}, and the workspace copy does not match "
                        f"dvc.lock and the catalog either: {REBUILD}")
        with fileio.atomic_path(obj) as tmp:  # the push never sees a half-written object
            if isinstance(source, Path):
                shutil.copyfile(source, tmp)
            else:
                tmp.write_bytes(source)
            if md5_of(tmp) != want:  # the workspace changed under us
                raise error(f"{what} changed while publish was copying it into the DVC cache; rerun publish")
            os.chmod(tmp, 0o444)  # as DVC leaves its cache objects
        repaired.append(f"the DVC cache copy of {what} ({obj}) was {state}; rewrote it from the workspace copy, "
                        "which matches dvc.lock and the catalog")
        print(f"publish: {repaired[-1]}", file=sys.stderr)
        return obj

    for file in files:
        md5 = outs.get(file)
        folder = next((out for out in outs if file.startswith(out.rstrip("/") + "/")), None)
        if md5 is None and folder:  # inside a directory output (the bundle): its md5 is in the folder's manifest
            def manifest(folder: str = folder) -> bytes | None:
                entries = [{"md5": md5_of(p), "relpath": p.relative_to(folder).as_posix()}
                           for p in sorted(Path(folder).rglob("*")) if p.is_file()]
                text = json.dumps(entries, sort_keys=True).encode()  # DVC's own serialization, checked by md5
                return text if f"{hashlib.md5(text).hexdigest()}.dir" == outs[folder] else None

            listed = json.loads(check(outs[folder], f"{folder}'s manifest", manifest).read_text())
            md5 = next((e["md5"] for e in listed if e["relpath"] == Path(file).relative_to(folder).as_posix()), None)
        if md5 is None:
            raise error(f"{file} is not an output in dvc.lock: {REBUILD}")

        def workspace(file: str = file, md5: str = md5) -> Path | None:
            good = md5_of(Path(file)) == md5 and fileio.sha256_file(file) == catalogued.get(file)
            return Path(file) if good else None

        check(md5, file, workspace)
    return repaired
