"""What this machine offers a build: its CPU, its memory, the free space where the farm writes, and where DVC caches.

Standard library only: the params stage reads it in well under a second, before any work.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

from da3_litert_farm.core.errors import FarmError

DVC_DIR = Path(".dvc")


class HostError(FarmError, ValueError):
    """A machine setting (an environment variable) the farm cannot use; the message names it."""
DEFAULT_CACHE = DVC_DIR / "cache"  # DVC's default cache.dir


def cpu_name() -> str:
    """The CPU model as /proc/cpuinfo names it, its family and model, and the cores this process may use."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break  # the first processor's block is enough
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    except OSError:  # not Linux
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']} model {fields['model']})"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{name}, {cores} cores"


def npu_compile_jobs(targets: int) -> int:
    """How many of a cell's NPU compiles run at once: Qualcomm's compiler keeps to one core, so one per core and at
    most one per chip; FARM_NPU_JOBS=N caps it where memory is short (one compile of the shipped preset at 896 holds
    about what its export does: docs/npu.md)."""
    if env := os.environ.get("FARM_NPU_JOBS"):
        if not env.isdigit() or int(env) < 1:
            raise HostError(f"FARM_NPU_JOBS={env!r}: give a whole number of compiles at once, 1 or more")
        return min(targets, int(env))
    return max(1, min(targets, os.cpu_count() or 1))


def memory_bytes() -> int:
    """The machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def existing(path: Path) -> Path:
    """`path`, or its nearest parent that exists: where a folder not made yet would be."""
    path = path.absolute()
    return next(p for p in (path, *path.parents) if p.exists())


def free_bytes(path: Path) -> int:
    """Free bytes on the disk that holds `path` (or would hold it)."""
    return shutil.disk_usage(existing(path)).free


def same_disk(a: Path, b: Path) -> bool:
    return existing(a).stat().st_dev == existing(b).stat().st_dev


def dvc_cache(root: Path = Path(".")) -> tuple[Path, str]:
    """(DVC's cache folder, its cache.type) as the repository's .dvc/config.local, then .dvc/config, set them:
    read here rather than through DVC, whose import alone takes longer than the params check. The user's and the
    system's DVC config are not read."""
    found: dict[str, str] = {}
    for name in ("config", "config.local"):  # the local file overrides
        section = None
        try:
            lines = (root / DVC_DIR / name).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]'\" ")
            elif section == "cache" and "=" in line:
                key, _, value = line.partition("=")
                found[key.strip()] = value.strip()
    where = Path(found["dir"]) if "dir" in found else None
    cache = root / DEFAULT_CACHE if where is None else where if where.is_absolute() else root / DVC_DIR / where
    return cache, found.get("type", "reflink,copy")
