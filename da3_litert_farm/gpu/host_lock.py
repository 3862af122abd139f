"""One machine, shared by conversions and owned by one GPU check at a time.

The GPU check runs LiteRT's GPU accelerator, on machines without a GPU on Mesa's software
Vulkan driver, which uses every core; beside other heavy work its completion wait starves.
Dask worker resources are counted per worker, and several workers share one machine, so
the rule lives in the machine itself: a reader-writer file lock, one for all its users.
Conversions hold it shared, a GPU check exclusively. The kernel drops a lock whose process
dies, so a killed worker never leaves the machine locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

# One lock for the machine, whoever runs the work: a fixed path in /tmp (world-writable on
# every Unix), not tempfile.gettempdir(), which TMPDIR may point elsewhere per user.
LOCK_FILE = Path("/tmp/da3_litert_farm.host.lock")


def _open_lock() -> int:
    """A descriptor on the machine's lock file, made readable and writable by all users if new."""
    try:
        # Read-only is enough for flock, and no O_CREAT: in sticky /tmp, fs.protected_regular
        # forbids O_CREAT on another user's file even when its mode allows it.
        return os.open(LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(LOCK_FILE, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:  # another process made it first
        return os.open(LOCK_FILE, os.O_RDONLY)
    os.fchmod(fd, 0o666)  # explicitly: the umask took bits off the mode above
    return fd


@contextlib.contextmanager
def _flock(mode: int) -> Iterator[None]:
    fd = _open_lock()
    try:
        fcntl.flock(fd, mode)  # blocks until granted; released on close or process death
        yield
    finally:
        os.close(fd)


def shared() -> contextlib.AbstractContextManager[None]:
    """Heavy work that may run beside other conversions, never beside a GPU check."""
    return _flock(fcntl.LOCK_SH)


def alone() -> contextlib.AbstractContextManager[None]:
    """Work that must have the machine to itself: the GPU check."""
    return _flock(fcntl.LOCK_EX)
