"""Run a command that moves data, and give up on it once it has stopped moving any.

A remote that accepts connections and then says nothing (a dropped VPN, a partition) holds `dvc push` for many
minutes: its plugins retry each file with their own timeouts (measured with S3: still waiting after 9 min).
The command is killed once it has read and written no byte for `stall_s` seconds (Linux: /proc/PID/io, the
process's reads and writes, sockets included); elsewhere it is only waited for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

POLL_S = 1.0


def io_bytes(pid: int) -> int | None:
    """Bytes the process has read and written so far, or None where the system does not say."""
    try:
        fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        return int(fields["rchar"]) + int(fields["wchar"])
    except (OSError, KeyError, ValueError):
        return None


def run_watched(cmd: list[str], stall_s: float, env: dict | None = None) -> tuple[int | None, str]:
    """(exit code, output) of `cmd`; (None, output so far) if it stalled for `stall_s` s and was killed with its
    children (it runs in a process group of its own)."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        seen, moved = None, time.monotonic()
        code: int | None = None
        try:
            while (code := proc.poll()) is None:
                time.sleep(POLL_S)
                now = io_bytes(proc.pid)
                if now is None or now != seen:
                    seen, moved = now, time.monotonic()
                elif time.monotonic() - moved > stall_s:
                    break
        finally:
            if code is None:  # stalled, or this process was interrupted: the push must not outlive it
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out.seek(0)
        return code, out.read().decode(errors="replace")
