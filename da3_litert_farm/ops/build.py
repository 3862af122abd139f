"""Build the farm's cells in parallel on Dask, then finish with one ordinary `dvc repro`.

    python -m da3_litert_farm.ops.build --jobs N            (make farm JOBS=N): a LocalCluster here
    python -m da3_litert_farm.ops.build --scheduler tcp://HOST:8786   (or DASK_SCHEDULER_ADDRESS)

1. Here: params.yaml is checked and `dvc repro checkpoint` runs once, so every worker converts
   the same weights; the `params` and `checkpoint` entries of dvc.lock travel with each task,
   and a worker checks their outputs out of the DVC cache (or pulls them from the remote).
2. One Dask task per cell runs its chain in a workspace of its own at this checkout's
   state: `dvc repro --single-item patch@A export@A quantize@A validate@A`, then `gpu@A`
   (the GPU check has the machine to itself: host_lock). DVC records each run in its
   run-cache. Workspaces:
   - worktree (default on a LocalCluster): a git worktree of this checkout, uncommitted
     changes included, whose DVC cache is this checkout's.
   - clone (default with --scheduler): a fresh clone of --repo-url at this commit with a
     cache of its own; it pulls what it needs from the DVC remote and pushes its outputs and
     run-cache there.
3. Here: `dvc repro` (with --pull when the workers used the remote) restores every cell
   from the run-cache, converting nothing, and builds the catalog and report; dvc.lock is
   what that ordinary sequential run writes.

A failed cell fails the build with its own message after the others finish; what they
built stays in the cache, artifacts/ is not touched, and a rerun converts only what failed.

This module is the coordinator; a worker runs ops.build_worker.build_cell. Each `dvc repro` of
steps 2 and 3 goes through DVC's Python API in a child process of its own (ops.dvc_repro), which
reports which stages it ran and which it restored from the run-cache.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from da3_litert_farm.config.params import PARAMS_FILE, ParamsError, load_params
from da3_litert_farm.core import paths
from da3_litert_farm.core.git import GitError, git
from da3_litert_farm.core.pipeline import SHARED_STAGES
from da3_litert_farm.ops.build_worker import Snapshot, build_cell
from da3_litert_farm.ops.dvc_command import BuildError, dvc, tail
from da3_litert_farm.ops.dvc_repro import repro
from da3_litert_farm.ops.farm_lock import FarmLockError, hold
from da3_litert_farm.ops.farm_repro import summary

WORKSPACES = ("worktree", "clone")


def snapshot(repo: Path, workspace: str, repo_url: str | None) -> Snapshot:
    if workspace == "worktree":
        # `git stash create` makes a commit of the tracked changes without touching anything.
        commit = git("stash", "create", cwd=repo).strip() or git("rev-parse", "HEAD", cwd=repo).strip()
        names = git("ls-files", "--others", "--exclude-standard", "-z", cwd=repo).split("\0")
        untracked = {n: (repo / n).read_bytes() for n in names if n and (repo / n).is_file() and not _is_output(n)}
        cache_dir = dvc("cache", "dir", cwd=repo).strip()  # by hand: the API has no call that applies DVC's default
        source, remote = str(repo), None
    else:
        dirty = "\n".join(line for line in git("status", "--porcelain", "--untracked-files=no", cwd=repo).splitlines()
                          if not _is_output(line[3:]))
        if dirty:
            raise BuildError(f"workers clone the repository at a commit, but tracked files have changes:\n{dirty}\n"
                             "commit them (and push, so the workers' --repo-url has the commit)")
        commit, untracked, cache_dir = git("rev-parse", "HEAD", cwd=repo).strip(), {}, None
        source = repo_url or git("remote", "get-url", "origin", cwd=repo).strip()
        remote = default_remote(repo)
    return Snapshot(commit=commit, untracked=untracked, lock=(repo / paths.LOCK_FILE).read_text(),
                    workspace=workspace, source=source, cache_dir=cache_dir, remote=remote)


def _is_output(name: str) -> bool:
    """dvc.lock and artifacts/ reach workers through DVC (the snapshot's lock, the cache), not git."""
    return name == paths.LOCK_FILE.as_posix() or name.startswith(f"{paths.ARTIFACTS.as_posix()}/")


def default_remote(repo: Path) -> tuple[str, str]:
    """The DVC remote's name and its URL as any machine sees it (DVC's config makes a relative path absolute)."""
    from da3_litert_farm.ops import dvc_adapter  # DVC's Python API: only the clone workspace needs it here

    remote = dvc_adapter.default_remote(repo)
    if remote is None:
        raise BuildError("workers that share no cache need a DVC remote: `dvc remote add -d NAME URL`")
    return remote


def build(repo: Path, jobs: int, scheduler: str | None, workspace: str, repo_url: str | None) -> int:
    started = time.time()
    params = load_params(repo / PARAMS_FILE)  # a bad params.yaml stops here, before any work
    cells = list(params.cells)  # each cell's chain is one task
    via_remote = workspace == "clone"
    print(f"build: {len(cells)} cells ({', '.join(cells)}) on "
          f"{scheduler or f'a LocalCluster of {jobs} workers'}, workspaces: {workspace}", flush=True)
    dvc("repro", "checkpoint", cwd=repo)
    if via_remote:
        dvc("push", *SHARED_STAGES, cwd=repo)
    snap = snapshot(repo, workspace, repo_url)

    from distributed import Client, LocalCluster, as_completed

    cluster = None if scheduler else LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                                  dashboard_address=None)
    results, failures = {}, {}
    try:
        with Client(scheduler or cluster) as client:
            futures = {client.submit(build_cell, snap, a, pure=False): a for a in cells}
            for future in as_completed(futures):
                cell = futures[future]
                try:
                    results[cell] = future.result()
                    print(f"build: {describe(results[cell], started)}", flush=True)
                except Exception as exc:  # noqa: BLE001  every failure is reported, the others go on
                    failures[cell] = _message(exc)
                    print(f"build {cell}: FAILED {failures[cell]}", file=sys.stderr, flush=True)
    finally:
        if cluster is not None:
            cluster.close()
    if failures:
        print(f"build: {len(failures)} of {len(cells)} cells failed ({', '.join(sorted(failures))}); "
              f"artifacts/ untouched. What the others built is in the DVC run-cache: a rerun converts only "
              f"what failed.", file=sys.stderr)
        return 1
    final = repro(cwd=repo, pull=via_remote)
    print(tail(final["log"]))
    print(f"build: dvc repro here restored {len(final['restored'])} stages from the run-cache and ran "
          f"{', '.join(final['ran']) or 'nothing'}; {len(cells)} cells in {time.time() - started:.1f} s",
          flush=True)
    ran = [s for r in results.values() for s in r["ran"]] + final["ran"]  # the workers' stages, then this repro's
    earlier = [s for s in final["restored"] if s not in ran]  # built by an earlier build, not by these workers
    print("\n".join(summary({"ran": ran, "restored": earlier}, True, time.time() - started, repo)))
    return 0


def describe(r: dict, started: float) -> str:
    """One line per cell; times in seconds since the build started (on its host's clock)."""
    ran = ", ".join(r["ran"]) or "nothing (all from the run-cache)"
    (c0, c1), (g0, g1) = ((t - started for t in span) for span in (r["convert"], r["gpu"]))
    return (f"{r['cell']} on {r['host']} (pid {r['pid']}): ran {ran}; convert {c0:.1f}-{c1:.1f} s, "
            f"GPU check {g0:.1f}-{g1:.1f} s (waited {g0 - c1:.1f} s to have the machine alone); "
            f"peak RSS {r['peak_child_rss_mb']:.0f} MB (the worker's largest process), worker {r['worker_rss_mb']:.0f} MB")


def _message(exc: BaseException) -> str:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return f"the worker running it died ({exc})"
    return str(exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.ops.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="workers of the LocalCluster (default 2)")
    parser.add_argument("--scheduler", default=os.environ.get("DASK_SCHEDULER_ADDRESS"),
                        help="an existing Dask scheduler, e.g. tcp://HOST:8786 (default: $DASK_SCHEDULER_ADDRESS)")
    parser.add_argument("--workspace", choices=WORKSPACES,
                        help="worktree: share this checkout's DVC cache (LocalCluster default); "
                             "clone: fresh clones through the DVC remote (default with --scheduler)")
    parser.add_argument("--repo-url", help="what workers clone (default: git remote get-url origin)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    workspace = args.workspace or ("clone" if args.scheduler else "worktree")
    if args.scheduler and workspace == "worktree":
        parser.error("--workspace worktree needs the workers on this machine: drop --scheduler or use clone")
    try:
        # One build per checkout: a second would convert the same cells again beside this one's workers.
        with hold(Path.cwd(), shlex.join(["python", "-m", __spec__.name, *(sys.argv[1:] if argv is None else argv)])):
            return build(Path.cwd(), args.jobs, args.scheduler, workspace, args.repo_url)
    except (ParamsError, BuildError, GitError, FarmLockError) as exc:
        print(f"build: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
