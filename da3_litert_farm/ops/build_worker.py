"""What a Dask worker of the parallel build (ops.build) runs: one cell's chain in a workspace of
its own at the coordinator's state (its Snapshot), then the GPU check with the machine to itself."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from da3_litert_farm.core import paths, peak_memory
from da3_litert_farm.core.git import GitError, git
from da3_litert_farm.core.pipeline import CONVERT_STAGES, GPU_STAGE, SHARED_STAGES, stage_name
from da3_litert_farm.gpu import host_lock
from da3_litert_farm.ops.dvc_command import BuildError, dvc, dvc_env
from da3_litert_farm.ops.dvc_repro import repro


@dataclass(frozen=True)
class Snapshot:
    """What a worker needs to reproduce the coordinator's checkout: its code, params and checkpoint entry."""

    commit: str  # HEAD, or a commit object holding the uncommitted changes of tracked files
    untracked: dict[str, bytes]  # new files git does not ignore
    lock: str  # dvc.lock after `dvc repro checkpoint`
    workspace: str  # worktree | clone
    source: str  # worktree: this checkout's path; clone: the git URL to clone
    cache_dir: str | None = None  # worktree: this checkout's DVC cache
    remote: tuple[str, str] | None = None  # clone: (DVC remote name, URL as seen from anywhere)


def build_cell(snap: Snapshot, cell: str) -> dict:
    """One cell's chain in a fresh workspace; runs on a Dask worker."""
    import psutil

    root = Path(tempfile.mkdtemp(prefix=f"da3-farm-{cell}-"))
    work = root / "repo"
    env = dvc_env()
    try:
        _make_workspace(snap, work)
        pull = snap.workspace == "clone"
        dvc("pull" if pull else "checkout", *SHARED_STAGES, cwd=work, env=env)
        with host_lock.shared():
            t0 = time.time()
            done = _stage(work, env, cell, pull, *CONVERT_STAGES)
        t1 = time.time()
        with host_lock.alone():
            t2 = time.time()
            done += _stage(work, env, cell, pull, GPU_STAGE)
        t3 = time.time()
        if pull:
            chain = [stage_name(s, cell) for s in (*CONVERT_STAGES, GPU_STAGE)]
            dvc("push", *chain, cwd=work, env=env)
            dvc("push", "--run-cache", cwd=work, env=env)
        return {"cell": cell, "host": socket.gethostname(), "pid": os.getpid(),
                "ran": [s for r in done for s in r["ran"]], "restored": [s for r in done for s in r["restored"]],
                "convert": (t0, t1), "gpu": (t2, t3),
                "peak_child_rss_mb": peak_memory.peak_rss_mib(resource.RUSAGE_CHILDREN),
                "worker_rss_mb": psutil.Process().memory_info().rss / 2**20}
    finally:
        _remove_workspace(snap, work)
        shutil.rmtree(root, ignore_errors=True)


def _stage(work: Path, env: dict[str, str], cell: str, pull: bool, *stages: str) -> list[dict]:
    """`dvc repro --single-item` of the cell's stages, in order; a failure names the cell and stage."""
    done = []
    for stage in stages:
        name = stage_name(stage, cell)
        try:
            done.append(repro(name, cwd=work, env=env, single_item=True, pull=pull))
        except BuildError as exc:
            raise BuildError(f"{name} on {socket.gethostname()}: {exc}") from None
    return done


def _make_workspace(snap: Snapshot, work: Path) -> None:
    if snap.workspace == "worktree":
        git("worktree", "add", "--quiet", "--detach", str(work), snap.commit, cwd=snap.source)
        for name, data in snap.untracked.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes(data)
        dvc("config", "--local", "cache.dir", snap.cache_dir, cwd=work)
    else:
        git("clone", "--quiet", "--no-checkout", snap.source, str(work), cwd=work.parent)
        try:
            git("checkout", "--quiet", "--detach", snap.commit, cwd=work)
        except GitError:
            raise BuildError(f"commit {snap.commit} is not in {snap.source}: push it first") from None
        name, url = snap.remote
        dvc("remote", "modify", "--local", name, "url", url, cwd=work)
    (work / paths.LOCK_FILE).write_text(snap.lock)


def _remove_workspace(snap: Snapshot, work: Path) -> None:
    if snap.workspace == "worktree":  # best effort: a worktree that was never made is no error
        # Its stages' native logs, into the checkout's: a failure names them by that relative path.
        if (work / paths.NATIVE_LOGS).is_dir():
            with contextlib.suppress(OSError):
                shutil.copytree(work / paths.NATIVE_LOGS, Path(snap.source) / paths.NATIVE_LOGS, dirs_exist_ok=True)
        git("worktree", "remove", "--force", str(work), cwd=snap.source, check=False)
        git("worktree", "prune", cwd=snap.source, check=False)
