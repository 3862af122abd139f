"""What aspects dropped from params.yaml leave behind: their folders and their dvc.lock entries.

DVC keeps both forever otherwise (and with them, cache objects `dvc gc` would keep). The
bundle stage, the first that gathers every aspect, clears them before it reads anything, so it
and every later stage (catalog, report) see only the aspects in params.yaml, and record
`artifacts/models` as it stays. Their outputs stay in the run-cache: an aspect added back is
restored without a conversion.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from da3_litert_farm.core import paths


def stale_aspect_dirs(aspects: set[str]) -> list[Path]:
    if not paths.MODELS.is_dir():
        return []
    return sorted(d for d in paths.MODELS.iterdir() if d.is_dir() and d.name not in aspects)


def prune_lock(aspects: set[str]) -> list[str]:
    """Drop dvc.lock entries of per-aspect stages whose aspect left params.yaml.

    DVC rewrites dvc.lock after the running stage by reading it from disk, so the pruning stays.
    """
    from dvc.utils.serialize import modify_yaml

    from da3_litert_farm.ops.atomic_dvc import install

    install()  # a build killed while this rewrites dvc.lock must not leave it empty
    if not paths.LOCK_FILE.exists():
        return []
    dvc_stages = yaml.safe_load(paths.DVC_FILE.read_text())["stages"]
    per_aspect = {name for name, stage in dvc_stages.items() if "foreach" in stage}
    with modify_yaml(paths.LOCK_FILE) as lock:
        stages = lock.get("stages", {})
        stale = [name for name in stages if "@" in name and name.split("@", 1)[0] in per_aspect
                 and name.split("@", 1)[1] not in aspects]
        for name in stale:
            del stages[name]
    return stale


def prune(aspects: set[str]) -> list[str]:
    """Remove what aspects not in `aspects` left behind; return what was removed, as messages."""
    removed = []
    for stale in stale_aspect_dirs(aspects):
        shutil.rmtree(stale)
        removed.append(f"removed {stale.as_posix()} (aspect no longer in params.yaml)")
    removed += [f"removed {entry} from {paths.LOCK_FILE}" for entry in prune_lock(aspects)]
    return removed
