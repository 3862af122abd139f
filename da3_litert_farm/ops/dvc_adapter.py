"""Every use the build makes of DVC's Python internals, in one place (pinned: dvc==3.67.*).

The `dvc` command says which stages a `dvc repro` ran, but not which it restored from the
run-cache instead; the build needs that to show that workers converted and the final run did not.
So `reproduce` runs `Repo.reproduce` and wraps the run-cache's restore to record its successes.
It relies on these internals, which tests/test_dvc_adapter.py checks on the installed DVC:

- `dvc.repo.Repo(root)`: a context manager; `repo.reproduce(targets, single_item=, pull=)` returns the
  stages it ran and those it restored alike, each with `.addressing` (`patch@9x16`).
- `repo.stage_cache`, a `dvc.stage.cache.StageCache` made per Repo, whose `restore(stage, run_cache=True,
  pull=False, dry=False)` `dvc.stage.run.run_stage` calls through `stage.repo.stage_cache.restore`
  before running a stage's command: it returns when it restored the outputs and raises
  `RunCacheNotFoundError` when it has nothing to restore. Replacing it on the instance therefore sees
  every restore of that Repo.
- `repo.config["core"]["remote"]` and `repo.config["remote"][NAME]["url"]`: the default remote, its URL
  made absolute by DVC's config loading when written as a relative path.
- For the `dvc` command, which makes its own Repo (`recording`): `dvc.stage.Stage._run_stage(self, dry, force,
  **kwargs)`, which runs a stage's command or restores it through `StageCache.restore(self, stage, ...)`, and
  `dvc.repo.scm_context.SCMContext`, whose `quiet` attribute (set in `__init__`) silences its closing "To track
  the changes with git, run: git add ..." hint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from dvc.exceptions import DvcException
from dvc.repo import Repo

__all__ = ["DvcException", "default_remote", "recording", "reproduce"]


def reproduce(targets: list[str] | None = None, *, root: Path | str | None = None, single_item: bool = False,
              pull: bool = False) -> tuple[list[str], list[str]]:
    """`dvc repro [--single-item] [--pull] [TARGETS]` in `root` (default: the repository around the
    working directory, as the dvc command finds it). Returns (stages run, stages restored from the
    run-cache), each in order; a failure raises DvcException."""
    restored = []
    with Repo(None if root is None else str(root)) as repo:
        restore = repo.stage_cache.restore

        def recording_restore(stage, *args, **kwargs):
            restore(stage, *args, **kwargs)  # raises when the run-cache has nothing: then the stage runs
            restored.append(stage.addressing)

        repo.stage_cache.restore = recording_restore
        repo.scm_context.quiet = True  # no "To track the changes with git" hint: ops.farm_repro's summary says it
        done = [s.addressing for s in repo.reproduce(targets or None, single_item=single_item, pull=pull)]
    return [s for s in done if s not in restored], restored


def default_remote(root: Path | str) -> tuple[str, str] | None:
    """The default DVC remote's name and URL as any machine sees it, or None when there is none."""
    with Repo(str(root)) as repo:
        name = repo.config["core"].get("remote")
        return (name, repo.config["remote"][name]["url"]) if name else None


@contextlib.contextmanager
def recording() -> Iterator[dict[str, list[str]]]:
    """Inside, every Repo's reproduction is recorded in the dict yielded: "ran" (commands that finished), "restored"
    (from the run-cache), "failed" (commands or restores that raised), each in order; and DVC's git-add hint is left
    out (ops.farm_repro says what to commit instead)."""
    from dvc.repo.scm_context import SCMContext
    from dvc.stage import Stage
    from dvc.stage.cache import StageCache

    seen: dict[str, list[str]] = {"ran": [], "restored": [], "failed": []}
    run_stage, restore, init = Stage._run_stage, StageCache.restore, SCMContext.__init__

    def recording_run(stage, dry, force, **kwargs):
        try:
            run_stage(stage, dry, force, **kwargs)
        except BaseException:
            seen["failed"].append(stage.addressing)
            raise
        if not dry and stage.addressing not in seen["restored"]:
            seen["ran"].append(stage.addressing)

    def recording_restore(cache, stage, *args, **kwargs):
        result = restore(cache, stage, *args, **kwargs)  # raises when the run-cache has nothing: then it runs
        if not kwargs.get("dry"):
            seen["restored"].append(stage.addressing)
        return result

    def quiet_init(context, *args, **kwargs):
        init(context, *args, **kwargs)
        context.quiet = True

    Stage._run_stage, StageCache.restore, SCMContext.__init__ = recording_run, recording_restore, quiet_init
    try:
        yield seen
    finally:
        Stage._run_stage, StageCache.restore, SCMContext.__init__ = run_stage, restore, init
