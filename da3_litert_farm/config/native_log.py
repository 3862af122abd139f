"""Native libraries' output, out of the terminal: what the stage skeleton (config.stage) runs each stage in.

LiteRT, Dawn, Mesa and Qualcomm's libraries log from C and C++ straight to file descriptors 2 and 1 ("INFO:
[accelerator_registry.cc...]", adapter and kernel lines on stderr; "Failed to load OpenCL" on stdout): most of a
build's terminal output, and Python's logging cannot catch it. So while a stage runs, fds 1 and 2 themselves point
at its file (core.paths.native_log: .farm-logs/STAGE@NAME.log), and Python's sys.stdout and sys.stderr keep the
terminal: the stage's own lines, warnings, errors and tracebacks still show. The file is written as the libraries
write (a crash leaves it) and removed when empty (so is the folder). FARM_NATIVE_LOG=1 leaves native output on the
terminal.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

KEEP = "FARM_NATIVE_LOG"  # =1: native output stays on the terminal
_FDS = {1: "stdout", 2: "stderr"}  # each fd native code writes to, and the Python stream that keeps the terminal


@dataclass(frozen=True)
class NativeLog:
    path: Path | None  # None: native output goes to the terminal (FARM_NATIVE_LOG=1)

    def written(self) -> Path | None:
        """The file, where native code wrote anything to it."""
        return self.path if self.path is not None and self.path.is_file() and self.path.stat().st_size else None


@contextlib.contextmanager
def to_file(path: Path, env: Mapping[str, str] = os.environ, until_exit: bool = False) -> Iterator[NativeLog]:
    """fds 1 and 2 -> `path` inside the block (truncated first), unless env sets FARM_NATIVE_LOG=1. until_exit: and
    again once Python has exited, for what native code writes as the process ends (LiteRT's accelerators log their
    destruction); only for a process that is one stage."""
    if env.get(KEEP) == "1":
        yield NativeLog(None)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    saved, swapped = {}, {}
    for fd, name in _FDS.items():
        stream = getattr(sys, name)
        stream.flush()
        saved[fd] = os.dup(fd)
        if _on(stream, fd):  # a test's captured stream is not on the fd: it stays as it is
            swapped[name] = stream
            setattr(sys, name, open(saved[fd], "w", buffering=1, encoding=stream.encoding,
                                    errors="backslashreplace", closefd=False))
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    for fd in _FDS:
        os.dup2(log, fd)
    os.close(log)
    try:
        yield NativeLog(path)
    finally:
        for name, stream in swapped.items():
            getattr(sys, name).flush()
            setattr(sys, name, stream)
        for fd, terminal in saved.items():
            os.dup2(terminal, fd)
            os.close(terminal)
        if path.is_file() and not path.stat().st_size:
            path.unlink()
            with contextlib.suppress(OSError):  # and the folder, where it holds no other log: a stage leaves nothing
                path.parent.rmdir()
        if until_exit:
            atexit.register(_again, path)


def _again(path: Path) -> None:
    """At exit, after Python's last words (an uncaught exception's traceback) reached the terminal; into a log
    the stage wrote to (native code that said nothing while the stage ran says little as it ends)."""
    if not path.is_file():
        return
    for name in _FDS.values():
        getattr(sys, name).flush()
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for fd in _FDS:
        os.dup2(log, fd)
    os.close(log)


def _on(stream, fd: int) -> bool:
    try:
        return stream.fileno() == fd
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False
