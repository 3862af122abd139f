"""File helpers: atomic writes (a reader sees the old file or the whole new one) and hashing."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import json
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(target: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success rename it over `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Made with mode 0o666, so the kernel applies the umask as for any new file (mkstemp's
    # 0600 would need the umask read, and reading it with os.umask changes it process-wide).
    # Keep the suffix: some writers (torch.export.save) insist on it.
    tmp = _new_beside(target, lambda p: os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)),
                      suffix=f".tmp{target.suffix}")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _new_beside(target: Path, make: Callable[[Path], None], suffix: str = "") -> Path:
    """A new hidden path beside `target` with a name no one else holds, made by `make`."""
    for _ in range(100):
        path = target.parent / f".{target.stem}.{secrets.token_hex(4)}{suffix}"
        try:
            make(path)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def write_bytes(target: Path | str, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_json(target: Path | str, document: object) -> None:
    write_bytes(target, (json.dumps(document, indent=2, sort_keys=False) + "\n").encode())


@contextlib.contextmanager
def atomic_dir(target: Path | str) -> Iterator[Path]:
    """Yield a temporary directory beside `target`; on success it replaces `target` whole.

    A reader, or a crash, never finds `target` missing where the kernel can swap two
    directories in one step (Linux renameat2 RENAME_EXCHANGE). Elsewhere the old directory
    is renamed aside before the new one is renamed in; a crash between the two leaves it
    aside, and the next atomic_dir on `target` puts it back.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    aside = target.parent / f".{target.name}.old"
    if aside.exists():  # a crash between the two renames of an earlier call
        if target.exists():
            shutil.rmtree(aside)
        else:
            os.rename(aside, target)
    tmp = _new_beside(target, os.mkdir)  # mode 0o777 less the umask: a normal folder (static hosts read it)
    try:
        yield tmp
        if not target.exists():
            os.rename(tmp, target)
        elif _exchange(tmp, target):
            pass  # tmp now holds the old directory, removed below
        else:
            os.rename(target, aside)
            try:
                os.rename(tmp, target)
            except BaseException:
                os.rename(aside, target)
                raise
            shutil.rmtree(aside)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step; False where the system or file system cannot."""
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):  # old kernel, or a file system without it
        return False
    raise OSError(err, f"swapping {a} and {b}: {os.strerror(err)}")


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True)


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
