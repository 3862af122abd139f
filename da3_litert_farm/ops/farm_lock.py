"""One build at a time per checkout: `make farm` and ops.build hold .dvc/tmp/farm.lock while they build.

    python -m da3_litert_farm.ops.farm_lock dvc repro      (what `make farm` runs): CMD, holding the lock

Why not DVC's own locks alone: DVC releases its repo lock while a stage's command runs, so a second
`dvc repro` starts, and is stopped only by whichever DVC lock it meets first: "Unable to acquire lock.
Most likely another DVC process is running or was terminated abruptly", or "'<some output>' is busy"
with advice to delete .dvc/tmp/rwlock; and ops.build's workers build in worktrees, where DVC's locks
in this checkout do not reach. This lock is an flock(2): the kernel drops it when its holders exit,
SIGKILL included, so it is never left stale; the file only says who holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from da3_litert_farm.core.errors import FarmError

LOCK_FILE = Path(".dvc") / "tmp" / "farm.lock"


class FarmLockError(FarmError):
    """Another build holds this checkout."""


@contextlib.contextmanager
def hold(repo: Path | str, command: str) -> Iterator[int]:
    """Hold the checkout's farm lock while the block runs (yields its file descriptor), or raise
    FarmLockError naming the build that holds it."""
    path = Path(repo) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "a process that has not said which"
            raise FarmLockError(f"another build is running in {Path(repo).resolve()}: {holder}; wait for it to "
                                f"finish (or stop it), then rerun") from None
        # Written in place, not renamed over: the lock belongs to this inode. Only refused builds read it.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, `{command}`, since {time.strftime('%H:%M:%S')}\n".encode(), 0)
        yield fd
    finally:
        os.close(fd)  # drops the lock (the file stays: removing it would race a process opening it)


def main(argv: list[str] | None = None) -> int:
    cmd = sys.argv[1:] if argv is None else argv
    if not cmd:
        print(f"usage: python -m {__spec__.name} CMD [ARGS...]", file=sys.stderr)
        return 2
    try:
        with hold(Path.cwd(), shlex.join(cmd)) as fd:
            # Become CMD, still holding the lock (its fd survives exec). No process in between: one that
            # outlived a SIGKILL as an unreaped zombie would pass for alive in DVC's .dvc/tmp/rwlock and
            # block the rerun ("... is busy, it is being blocked by: (PID n)").
            os.set_inheritable(fd, True)
            os.execvp(cmd[0], cmd)
    except FarmLockError as exc:
        print(f"farm: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
