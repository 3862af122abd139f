"""System packages that the farm's checks need (a GPU adapter, a browser): which system, and the install."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path


def os_release() -> dict[str, str]:
    try:
        lines = Path("/etc/os-release").read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in lines if "=" in line)
    return {k: v.strip().strip('"') for k, v in pairs}


INSTALL_TIMEOUT_S = 20 * 60  # apt fetches a few hundred MB at most; past this it is stuck (a lock, a dead mirror)
STOP_GRACE_S = 30


def run_install(tool: str, packages: str, script: str, timeout_s: float = INSTALL_TIMEOUT_S) -> bool:
    """Run a root install line; on failure, or past `timeout_s`, print its tail and return False."""
    print(f"{tool}: installing {packages}: {script}")
    # A session of its own, so that a timeout stops apt and dpkg too, not only the shell.
    with subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            output = _stop(proc)
            print(f"{tool}: installing {packages} did not finish in {timeout_s:g} s and was stopped "
                  f"(if apt was interrupted, `dpkg --configure -a` completes it): {output.strip()[-2000:]}",
                  file=sys.stderr)
            return False
    if proc.returncode != 0:
        print(f"{tool}: install failed ({proc.returncode}): {output.strip()[-2000:]}", file=sys.stderr)
    return proc.returncode == 0


def _stop(proc: subprocess.Popen) -> str:
    """End the install's whole process group, politely first (dpkg finishes its step on SIGTERM); its output."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.communicate(timeout=STOP_GRACE_S)[0]
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0]
