"""The `dvc` command as the build runs it: in a child process with this environment's python first on
PATH (stages run `python -m ...`); a failure raises BuildError with the end of its output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from da3_litert_farm.core.errors import FarmError

_TAIL_LINES = 15


class BuildError(FarmError, RuntimeError):
    """A step of the parallel build failed; the message names it and ends with its output."""


def dvc_env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "DVC_NO_ANALYTICS": "1"}


def dvc(*args: str, cwd: Path | str, env: dict[str, str] | None = None) -> str:
    """`dvc ARGS`, with dvc.lock written atomically (da3_litert_farm/ops/atomic_dvc.py)."""
    return run([sys.executable, "-m", "da3_litert_farm.ops.atomic_dvc", *args], cwd, env or dvc_env(),
               shown=f"dvc {' '.join(args)}")


def run(cmd: list[str], cwd: Path | str, env: dict[str, str] | None = None, shown: str | None = None) -> str:
    """stdout of `cmd`; `shown` is how a failure names the command (default: the command line)."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"`{shown or ' '.join(cmd)}` {_exit_reason(proc.returncode)}:\n"
                         f"{tail(proc.stdout + proc.stderr)}")
    return proc.stdout


def _exit_reason(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"failed (exit {code})"


def tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-_TAIL_LINES:])
