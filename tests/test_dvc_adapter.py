"""ops.dvc_adapter leans on DVC internals that no DVC release promises to keep: these tests fail, and
name what moved, when the installed DVC no longer has them, and check on a tiny repository that the
run-cache hook still sees a restore."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from dvc.exceptions import DvcException
from dvc.repo import Repo
from dvc.stage import run as stage_run
from dvc.stage.cache import RunCacheNotFoundError, StageCache

from da3_litert_farm.core.git import git
from da3_litert_farm.ops import dvc_adapter
from da3_litert_farm.ops.dvc_command import dvc


def test_the_repo_api_the_adapter_calls_is_there():
    assert hasattr(Repo, "__enter__") and hasattr(Repo, "__exit__")
    params = inspect.signature(Repo.reproduce).parameters
    assert list(params)[:2] == ["self", "targets"]
    assert "single_item" in params
    # `pull` travels through **kwargs down to the stage's run and the run-cache's restore.
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def test_the_run_cache_restore_the_adapter_wraps_is_there():
    assert list(inspect.signature(StageCache.restore).parameters) == ["self", "stage", "run_cache", "pull", "dry"]
    assert issubclass(RunCacheNotFoundError, DvcException)
    # DVC reaches restore through the Repo's instance attribute, so replacing it there sees every call.
    source = inspect.getsource(stage_run.run_stage)
    assert "stage.repo.stage_cache.restore(" in source and "except RunCacheNotFoundError" in source


def tiny_repo(root: Path) -> Path:
    """A git + DVC repository with one stage `s` that writes b from a and notes each run in runs.log
    (not an output, so a restore from the run-cache leaves it alone)."""
    git("init", "-q", cwd=root)
    dvc("init", "-q", cwd=root)
    (root / "a").write_text("hello\n")
    dvc("stage", "add", "-q", "-n", "s", "-d", "a", "-o", "b", "cp a b && echo run >> runs.log", cwd=root)
    return root


def test_a_repo_holds_its_own_stage_cache(tmp_path):
    with Repo(str(tiny_repo(tmp_path))) as repo:
        assert isinstance(repo.stage_cache, StageCache)
        assert "stage_cache" in vars(repo)  # per instance: the hook never leaks into another Repo


def test_reproduce_runs_then_restores_from_the_run_cache_without_rerunning(tmp_path, monkeypatch):
    repo = tiny_repo(tmp_path)
    monkeypatch.chdir(repo)  # as the child process runs it: in the repository

    assert dvc_adapter.reproduce() == (["s"], [])
    assert (repo / "b").read_text() == "hello\n"
    assert (repo / "runs.log").read_text() == "run\n"

    # Output and lock entry gone: only the run-cache knows that this command made b from this a.
    (repo / "b").unlink()
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    del lock["stages"]["s"]
    (repo / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert dvc_adapter.reproduce(["s"], single_item=True) == ([], ["s"])
    assert (repo / "b").read_text() == "hello\n"
    assert (repo / "runs.log").read_text() == "run\n"  # the command did not run again


def test_a_failing_stage_raises_dvcs_error(tmp_path, monkeypatch):
    repo = tiny_repo(tmp_path)
    dvc("stage", "add", "-q", "-n", "fails", "-d", "a", "-o", "c", "exit 3", cwd=repo)
    monkeypatch.chdir(repo)
    with pytest.raises(DvcException, match=r"failed to reproduce 'fails'"):
        dvc_adapter.reproduce(["fails"], single_item=True)
    assert not (repo / "c").exists()


def test_default_remote_reads_the_name_and_makes_a_relative_url_absolute(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = tiny_repo(tmp_path / "repo")
    assert dvc_adapter.default_remote(repo) is None
    dvc("remote", "add", "-d", "storage", "../remote", cwd=repo)
    assert "url = ../../remote" in (repo / ".dvc/config").read_text()  # written relative to .dvc/
    assert dvc_adapter.default_remote(repo) == ("storage", str(tmp_path / "remote"))


def test_what_recording_wraps_for_the_dvc_command_is_there():
    """ops.farm_repro's recording: every stage's run goes through Stage._run_stage, and SCMContext's `quiet`
    silences its git-add hint."""
    from dvc.repo import scm_context
    from dvc.stage import Stage

    assert list(inspect.signature(Stage._run_stage).parameters) == ["self", "dry", "force", "kwargs"]
    assert "self._run_stage(dry, force" in inspect.getsource(Stage.run)
    source = inspect.getsource(scm_context)  # the module's: ops.atomic_dvc wraps SCMContext.__call__ in its process
    assert "self.quiet: bool = False" in source and "quiet = self.quiet" in source and "not quiet" in source
