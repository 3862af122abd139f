"""What models, tiers and aspects dropped from params.yaml leave behind: their folders and their dvc.lock entries.

DVC keeps both forever otherwise (and with them, cache objects `dvc gc` would keep). Each bundle stage
clears its own folder (artifacts/models/MODEL/TIER/, its dependency) of dropped aspects before it reads
it; the catalog stage, the first that gathers every cell, clears the rest (dropped models' and tiers'
folders, checkpoints and bundles, the NPU tree's dropped cells, and the dvc.lock entries of every stage no longer in the matrix),
so it and the report see only what params.yaml holds, and record the folders as they stay. Their
outputs stay in the run-cache: a cell added back is restored without a conversion.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from da3_litert_farm.config.params import Params
from da3_litert_farm.core import paths
from da3_litert_farm.core.cells import split_bundle


def _stale(folder: Path, keep: set[str]) -> list[Path]:
    return sorted(d for d in folder.iterdir() if d.is_dir() and d.name not in keep) if folder.is_dir() else []


def _remove(folders: list[Path], why: str) -> list[str]:
    for folder in folders:
        shutil.rmtree(folder)
    return [f"removed {folder.as_posix()} ({why})" for folder in folders]


def prune_tier(params: Params, bundle: str) -> list[str]:
    """Clear one bundle's folder of the aspects params.yaml no longer has; return what was removed."""
    model, tier = split_bundle(bundle)
    return _remove(_stale(paths.tier_dir(model, tier), set(params.aspects)), "aspect no longer in params.yaml")


def prune_farm(params: Params) -> list[str]:
    """Remove what models and tiers params.yaml no longer has, and every stale dvc.lock entry."""
    models, tiers = set(params.models), {str(t) for t in params.tiers}
    removed = _remove(_stale(paths.MODELS, models), "model no longer in params.yaml")
    for model in sorted(models):
        removed += _remove(_stale(paths.MODELS / model, tiers), "tier no longer in params.yaml")
    removed += _remove(_stale(paths.CHECKPOINTS, models), "model no longer in params.yaml")
    removed += _remove(_stale(paths.BUNDLES, set(params.bundles())), "bundle no longer in params.yaml")
    removed += _remove(_stale(paths.NPU, models), "model no longer in params.yaml")
    for model in sorted(models):
        removed += _remove(_stale(paths.NPU / model, tiers), "tier no longer in params.yaml")
        for tier in sorted(tiers):  # no bundle stage reads this tree, so its dropped aspects go here too
            removed += _remove(_stale(paths.NPU / model / tier, set(params.aspects)), "aspect no longer in params.yaml")
    return removed + [f"removed {entry} from {paths.LOCK_FILE}" for entry in prune_lock(params)]


def prune_lock(params: Params) -> list[str]:
    """Drop dvc.lock entries of fanned-out stages (stage@name) whose name left params.yaml.

    DVC rewrites dvc.lock after the running stage by reading it from disk, so the pruning stays.
    """
    from dvc.utils.serialize import modify_yaml

    from da3_litert_farm.ops.atomic_dvc import install

    install()  # a build killed while this rewrites dvc.lock must not leave it empty
    if not paths.LOCK_FILE.exists():
        return []
    dvc_stages = yaml.safe_load(paths.DVC_FILE.read_text())["stages"]
    fanned = {name for name, stage in dvc_stages.items() if "foreach" in stage or "matrix" in stage}
    names = set(params.models) | set(params.cells) | set(params.bundles())
    with modify_yaml(paths.LOCK_FILE) as lock:
        stages = lock.get("stages", {})
        # a bare name too: a farm from before the matrix ran `bundle` and `checkpoint` once
        stale = [name for name in stages if name.split("@", 1)[0] in fanned
                 and ("@" not in name or name.split("@", 1)[1] not in names)]
        for name in stale:
            del stages[name]
    return stale
