"""One machine, shared by conversions and owned by one GPU check at a time.

The GPU check runs LiteRT's GPU accelerator, on machines without a GPU on Mesa's software
Vulkan driver, which uses every core; beside other heavy work its completion wait starves.
Dask worker resources are counted per worker, and several workers share one machine, so
the rule lives in the machine itself: a reader-writer file lock. Conversions hold it
shared, a GPU check exclusively. The kernel drops a lock whose process dies, so a killed
worker never leaves the machine locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = Path(tempfile.gettempdir()) / f"da3_litert_farm-{os.getuid()}.host.lock"


@contextlib.contextmanager
def _flock(mode: int) -> Iterator[None]:
    with open(LOCK_FILE, "a") as handle:
        fcntl.flock(handle, mode)  # blocks until granted; released on close or process death
        yield


def shared() -> contextlib.AbstractContextManager[None]:
    """Heavy work that may run beside other conversions, never beside a GPU check."""
    return _flock(fcntl.LOCK_SH)


def alone() -> contextlib.AbstractContextManager[None]:
    """Work that must have the machine to itself: the GPU check."""
    return _flock(fcntl.LOCK_EX)
