"""The one way the farm and the light client run git.

Every failure is a GitError that names the command, the folder it ran in and git's own reason
(the first lines of what it printed), whether git failed, could not start, or ran too long.
Standard library only, Python >= 3.9: the light client imports it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Optional, Union

from da3_litert_farm.core.errors import FarmError

# A git that waits longer than this (a host that never answers, a hidden credential prompt) fails.
TIMEOUT_S = 300
_REASON_LINES = 5


class GitError(FarmError, RuntimeError):
    """A git command failed, could not start, or ran past its time limit."""


def git(*args: str, cwd: Union[Path, str] = ".", stdin: Optional[str] = None, check: bool = True,
        timeout: Optional[float] = TIMEOUT_S) -> str:
    """Run `git ARGS` in `cwd` and return what it printed on stdout.

    check=False: a non-zero exit is not an error (best-effort clean-up); git missing or too slow still is."""
    return _run(args, cwd, stdin, check, timeout, text=True)


def git_bytes(*args: str, cwd: Union[Path, str] = ".", timeout: Optional[float] = TIMEOUT_S) -> bytes:
    """`git ARGS` as git(), returning stdout's exact bytes (`git show REV:PATH` of a signed file: no decoding,
    no newline translation)."""
    return _run(args, cwd, None, True, timeout, text=False)


def _run(args: tuple, cwd: Union[Path, str], stdin: Optional[str], check: bool, timeout: Optional[float],
         text: bool):
    where = f"`{_shown(args)}` in {Path(cwd).resolve()}"
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=text,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GitError(f"{where} gave no result in {timeout:g} s") from None
    except OSError as exc:  # git not installed, or the folder does not exist
        raise GitError(f"{where} could not start: {exc}") from None
    if check and proc.returncode != 0:
        # Most commands say why on stderr; a few (commit with nothing to commit) on stdout.
        err, out = (proc.stderr, proc.stdout) if text else (proc.stderr.decode("utf-8", "replace"),
                                                            proc.stdout.decode("utf-8", "replace"))
        reason = "\n".join((err.strip() or out.strip()).splitlines()[:_REASON_LINES])
        raise GitError(f"{where} failed (exit {proc.returncode}): {reason}")
    return proc.stdout


def _shown(args: tuple) -> str:
    """The command as a reader would type it (arguments with spaces quoted)."""
    return " ".join(["git", *(repr(a) if not a or " " in a else a for a in args)])
