"""core.git: the one git wrapper; every failure is a GitError naming the command, the folder and git's reason."""

from __future__ import annotations

import re
import time

import pytest

from da3_litert_farm.core.git import GitError, git


def test_git_returns_stdout_and_feeds_stdin(tmp_path):
    git("init", "-q", cwd=tmp_path)
    blob = git("hash-object", "-w", "--stdin", cwd=tmp_path, stdin="hello\n").strip()
    assert blob == "ce013625030ba8dba906f756967f9e9ca394464a"  # git's id of "hello\n", as `echo hello | git hash-object --stdin`
    assert git("cat-file", "-p", blob, cwd=tmp_path) == "hello\n"


def test_a_failure_names_the_command_the_folder_and_gits_reason(tmp_path):
    with pytest.raises(GitError, match=rf"^`git rev-parse HEAD` in {re.escape(str(tmp_path))} failed \(exit 128\): "
                                       r"fatal: not a git repository"):
        git("rev-parse", "HEAD", cwd=tmp_path)


def test_check_false_lets_a_failure_pass(tmp_path):
    assert git("rev-parse", "HEAD", cwd=tmp_path, check=False) == ""


def test_a_missing_folder_and_a_slow_git_are_git_errors_too(tmp_path):
    with pytest.raises(GitError, match=rf"^`git status` in {re.escape(str(tmp_path / 'gone'))} could not start: "):
        git("status", cwd=tmp_path / "gone", check=False)
    started = time.monotonic()
    with pytest.raises(GitError, match=r"^`git -c 'alias.slow=!sleep 3' slow` in .* gave no result in 0.5 s$"):
        git("-c", "alias.slow=!sleep 3", "slow", cwd=tmp_path, timeout=0.5)
    assert time.monotonic() - started < 2.5
