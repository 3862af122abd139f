"""Build the farm's aspects in parallel on Dask, then finish with one ordinary `dvc repro`.

    python -m da3_litert_farm.ops.build --jobs N            (make farm JOBS=N): a LocalCluster here
    python -m da3_litert_farm.ops.build --scheduler tcp://HOST:8786   (or DASK_SCHEDULER_ADDRESS)

1. Here: params.yaml is checked and `dvc repro checkpoint` runs once, so every worker converts
   the same weights; the `params` and `checkpoint` entries of dvc.lock travel with each task,
   and a worker checks their outputs out of the DVC cache (or pulls them from the remote).
2. One Dask task per aspect runs its chain in a workspace of its own at this checkout's
   state: `dvc repro --single-item patch@A export@A quantize@A validate@A`, then `gpu@A`
   (the GPU check has the machine to itself: host_lock). DVC records each run in its
   run-cache. Workspaces:
   - worktree (default on a LocalCluster): a git worktree of this checkout, uncommitted
     changes included, whose DVC cache is this checkout's.
   - clone (default with --scheduler): a fresh clone of --repo-url at this commit with a
     cache of its own; it pulls what it needs from the DVC remote and pushes its outputs and
     run-cache there.
3. Here: `dvc repro` (with --pull when the workers used the remote) restores every aspect
   from the run-cache, converting nothing, and builds the catalog and report; dvc.lock is
   what that ordinary sequential run writes.

A failed aspect fails the build with its own message after the others finish; what they
built stays in the cache, artifacts/ is not touched, and a rerun converts only what failed.

Each `dvc repro` of steps 2 and 3 goes through DVC's Python API in a child process of its own
(`repro`), which reports which stages it ran and which it restored from the run-cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from da3_litert_farm.gpu import host_lock
from da3_litert_farm.core import memory, paths
from da3_litert_farm.core.pipeline import CONVERT_STAGES, GPU_STAGE, SHARED_STAGES, stage_name
from da3_litert_farm.config.params import PARAMS_FILE, ParamsError, load_params

WORKSPACES = ("worktree", "clone")
_TAIL_LINES = 15


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Snapshot:
    """What a worker needs to reproduce this checkout: its code, params and checkpoint entry."""

    commit: str  # HEAD, or a commit object holding the uncommitted changes of tracked files
    untracked: dict[str, bytes]  # new files git does not ignore
    lock: str  # dvc.lock after `dvc repro checkpoint`
    workspace: str  # worktree | clone
    source: str  # worktree: this checkout's path; clone: the git URL to clone
    cache_dir: str | None = None  # worktree: this checkout's DVC cache
    remote: tuple[str, str] | None = None  # clone: (DVC remote name, URL as seen from anywhere)


def _run(cmd: list[str], cwd: Path | str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"`{' '.join(cmd)}` {_exit_reason(proc.returncode)}:\n{_tail(proc.stdout + proc.stderr)}")
    return proc.stdout


def _exit_reason(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"failed (exit {code})"


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-_TAIL_LINES:])


def dvc_env() -> dict[str, str]:
    """Stages run `python -m ...`: this environment's python first on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "DVC_NO_ANALYTICS": "1"}


def dvc(*args: str, cwd: Path | str, env: dict[str, str] | None = None) -> str:
    return _run([sys.executable, "-m", "dvc", *args], cwd, env or dvc_env())


def git(*args: str, cwd: Path | str) -> str:
    return _run(["git", *args], cwd)


def repro(*targets: str, cwd: Path | str, env: dict[str, str] | None = None, single_item: bool = False,
          pull: bool = False) -> dict:
    """`dvc repro` through DVC's Python API, in a child process (`dvc_repro_main`), so that a stage or
    DVC itself dying fails this call with the end of its output, not the build. Returns the stages it
    ran and those it restored from the run-cache, in order, and its output ("log")."""
    flags = [*(["--single-item"] if single_item else []), *(["--pull"] if pull else [])]
    out = _run([sys.executable, "-m", "da3_litert_farm.ops.build", "dvc", "repro", *flags, *targets], cwd,
               env or dvc_env())
    log, _, result = out.rstrip("\n").rpartition("\n")
    return {**json.loads(result), "log": log}


def dvc_repro_main(argv: list[str]) -> int:
    """The child process of `repro`: prints DVC's output, then the outcome as JSON on the last line."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.ops.build dvc repro")
    parser.add_argument("targets", nargs="*")
    parser.add_argument("--single-item", action="store_true")
    parser.add_argument("--pull", action="store_true")
    args = parser.parse_args(argv)
    restored = []
    try:
        with Repo() as repo:  # the repository around the working directory, as the dvc command finds it
            # Repo.reproduce returns the stages it ran and those it restored alike; a restore is a call
            # of the run-cache's restore() that does not raise (RunCacheNotFoundError: nothing to restore).
            restore = repo.stage_cache.restore

            def recording_restore(stage, *a, **kw):
                restore(stage, *a, **kw)
                restored.append(stage.addressing)

            repo.stage_cache.restore = recording_restore
            done = [s.addressing for s in repo.reproduce(args.targets or None, single_item=args.single_item,
                                                        pull=args.pull)]
    except DvcException as exc:  # as the dvc command says it: what failed, then why
        print(f"ERROR: {exc}" + (f": {exc.__cause__}" if exc.__cause__ else ""), file=sys.stderr)
        return 1
    print("\n" + json.dumps({"ran": [s for s in done if s not in restored], "restored": restored}))
    return 0


# --- the coordinator (this checkout) ---------------------------------------------------------

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
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc_repo:
        name = dvc_repo.config["core"].get("remote")
        if not name:
            raise BuildError("workers that share no cache need a DVC remote: `dvc remote add -d NAME URL`")
        return name, dvc_repo.config["remote"][name]["url"]


def build(repo: Path, jobs: int, scheduler: str | None, workspace: str, repo_url: str | None) -> int:
    started = time.time()
    params = load_params(repo / PARAMS_FILE)  # a bad params.yaml stops here, before any work
    aspects = list(params.aspects)
    via_remote = workspace == "clone"
    print(f"build: {len(aspects)} aspects ({', '.join(aspects)}) on "
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
            futures = {client.submit(build_aspect, snap, a, pure=False): a for a in aspects}
            for future in as_completed(futures):
                aspect = futures[future]
                try:
                    results[aspect] = future.result()
                    print(f"build: {describe(results[aspect], started)}", flush=True)
                except Exception as exc:  # noqa: BLE001  every failure is reported, the others go on
                    failures[aspect] = _message(exc)
                    print(f"build {aspect}: FAILED {failures[aspect]}", file=sys.stderr, flush=True)
    finally:
        if cluster is not None:
            cluster.close()
    if failures:
        print(f"build: {len(failures)} of {len(aspects)} aspects failed ({', '.join(sorted(failures))}); "
              f"artifacts/ untouched. What the others built is in the DVC run-cache: a rerun converts only "
              f"what failed.", file=sys.stderr)
        return 1
    final = repro(cwd=repo, pull=via_remote)
    print(_tail(final["log"]))
    print(f"build: dvc repro here restored {len(final['restored'])} stages from the run-cache and ran "
          f"{', '.join(final['ran']) or 'nothing'}; {len(aspects)} aspects in {time.time() - started:.1f} s",
          flush=True)
    return 0


def describe(r: dict, started: float) -> str:
    """One line per aspect; times in seconds since the build started (on its host's clock)."""
    ran = ", ".join(r["ran"]) or "nothing (all from the run-cache)"
    (c0, c1), (g0, g1) = ((t - started for t in span) for span in (r["convert"], r["gpu"]))
    return (f"{r['aspect']} on {r['host']} (pid {r['pid']}): ran {ran}; convert {c0:.1f}-{c1:.1f} s, "
            f"GPU check {g0:.1f}-{g1:.1f} s (waited {g0 - c1:.1f} s to have the machine alone); "
            f"peak RSS {r['peak_child_rss_mb']:.0f} MB (the worker's largest process), worker {r['worker_rss_mb']:.0f} MB")


def _message(exc: BaseException) -> str:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return f"the worker running it died ({exc})"
    return str(exc)


# --- a worker ---------------------------------------------------------------------------------

def build_aspect(snap: Snapshot, aspect: str) -> dict:
    """One aspect's chain in a fresh workspace; runs on a Dask worker."""
    import psutil

    root = Path(tempfile.mkdtemp(prefix=f"da3-farm-{aspect}-"))
    work = root / "repo"
    env = dvc_env()
    try:
        _make_workspace(snap, work)
        pull = snap.workspace == "clone"
        dvc("pull" if pull else "checkout", *SHARED_STAGES, cwd=work, env=env)
        with host_lock.shared():
            t0 = time.time()
            done = _stage(work, env, aspect, pull, *CONVERT_STAGES)
        t1 = time.time()
        with host_lock.alone():
            t2 = time.time()
            done += _stage(work, env, aspect, pull, GPU_STAGE)
        t3 = time.time()
        if pull:
            chain = [stage_name(s, aspect) for s in (*CONVERT_STAGES, GPU_STAGE)]
            dvc("push", *chain, cwd=work, env=env)
            dvc("push", "--run-cache", cwd=work, env=env)
        return {"aspect": aspect, "host": socket.gethostname(), "pid": os.getpid(),
                "ran": [s for r in done for s in r["ran"]], "restored": [s for r in done for s in r["restored"]],
                "convert": (t0, t1), "gpu": (t2, t3),
                "peak_child_rss_mb": memory.peak_rss_mib(resource.RUSAGE_CHILDREN),
                "worker_rss_mb": psutil.Process().memory_info().rss / 2**20}
    finally:
        _remove_workspace(snap, work)
        shutil.rmtree(root, ignore_errors=True)


def _stage(work: Path, env: dict[str, str], aspect: str, pull: bool, *stages: str) -> list[dict]:
    """`dvc repro --single-item` of the aspect's stages, in order; a failure names the aspect and stage."""
    done = []
    for stage in stages:
        name = stage_name(stage, aspect)
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
        except BuildError:
            raise BuildError(f"commit {snap.commit} is not in {snap.source}: push it first") from None
        name, url = snap.remote
        dvc("remote", "modify", "--local", name, "url", url, cwd=work)
    (work / paths.LOCK_FILE).write_text(snap.lock)


def _remove_workspace(snap: Snapshot, work: Path) -> None:
    if snap.workspace == "worktree":
        subprocess.run(["git", "worktree", "remove", "--force", str(work)], cwd=snap.source, capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=snap.source, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["dvc", "repro"]:  # `repro`'s child process
        return dvc_repro_main(argv[2:])
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
        return build(Path.cwd(), args.jobs, args.scheduler, workspace, args.repo_url)
    except (ParamsError, BuildError) as exc:
        print(f"build: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
