"""System packages that the farm's checks need (a GPU adapter, a browser): which system, and the install."""

from __future__ import annotations

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


def run_install(tool: str, packages: str, script: str) -> bool:
    """Run a root install line; on failure print its tail and return False."""
    print(f"{tool}: installing {packages}: {script}")
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{tool}: install failed ({proc.returncode}): {(proc.stdout + proc.stderr).strip()[-2000:]}",
              file=sys.stderr)
    return proc.returncode == 0
