"""File helpers: atomic writes (a reader sees the old file or the whole new one) and hashing."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(target: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success rename it over `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Keep the suffix: some writers (torch.export.save) insist on it.
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=f".tmp{target.suffix}", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        tmp_path.chmod(0o666 & ~_umask())  # mkstemp makes 0600; a normal file is readable
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(target: Path | str, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_json(target: Path | str, document: object) -> None:
    write_bytes(target, (json.dumps(document, indent=2, sort_keys=False) + "\n").encode())


@contextlib.contextmanager
def atomic_dir(target: Path | str) -> Iterator[Path]:
    """Yield a temporary directory beside `target`; on success it replaces `target` whole."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; a normal folder is readable (static hosts)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old / "d")
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
