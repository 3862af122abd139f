"""Native libraries' stderr, out of the terminal: what the stage skeleton (config.stage) runs each stage in.

LiteRT, Dawn, Mesa and Qualcomm's libraries log from C and C++ straight to file descriptor 2 ("Failed to load
OpenCL", "INFO: [accelerator_registry.cc...]", adapter and kernel lines): most of a build's terminal output, and
Python's logging cannot catch it. So while a stage runs, fd 2 itself points at its file (core.paths.native_log:
.farm-logs/STAGE@NAME.log), and Python's sys.stderr keeps the terminal: the stage's own lines, warnings, errors
and tracebacks still show. The file is written as the libraries write (a crash leaves it) and removed when empty.
FARM_NATIVE_LOG=1 leaves native output on the terminal.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

KEEP = "FARM_NATIVE_LOG"  # =1: native output stays on the terminal


@dataclass(frozen=True)
class NativeLog:
    path: Path | None  # None: native output goes to the terminal (FARM_NATIVE_LOG=1)

    def written(self) -> Path | None:
        """The file, where native code wrote anything to it."""
        return self.path if self.path is not None and self.path.is_file() and self.path.stat().st_size else None


@contextlib.contextmanager
def to_file(path: Path, env: Mapping[str, str] = os.environ) -> Iterator[NativeLog]:
    """fd 2 -> `path` inside the block (truncated first), unless env sets FARM_NATIVE_LOG=1."""
    if env.get(KEEP) == "1":
        yield NativeLog(None)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    terminal = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    python_stderr, own = sys.stderr, None
    if _on_fd2(python_stderr):  # a test's captured sys.stderr is not on fd 2: it stays as it is
        own = open(terminal, "w", buffering=1, encoding=python_stderr.encoding, errors="backslashreplace",
                   closefd=False)
        sys.stderr = own
    try:
        yield NativeLog(path)
    finally:
        if own is not None:
            own.flush()
            sys.stderr = python_stderr
        os.dup2(terminal, 2)
        os.close(terminal)
        if path.is_file() and not path.stat().st_size:
            path.unlink()


def _on_fd2(stream) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False
