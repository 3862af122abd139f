"""DVC's own writes of dvc.lock, made atomic (da3_litert_farm/ops/atomic_dvc.py): a write that fails half-way
keeps the old file whole, where DVC alone empties it (the fault suite's killed builds found that)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from dvc.utils.serialize import dump_yaml, modify_yaml
from ruamel.yaml.representer import RepresenterError

LOCK = "schema: '2.0'\nstages:\n  params:\n    cmd: python -m stages.params --write\n"


class Unwritable:
    """Data YAML cannot represent: the dump fails after the file was opened."""


def _failing_dump(path) -> None:
    with pytest.raises(RepresenterError):
        dump_yaml(path, {"schema": "2.0", "stages": {"params": {"cmd": Unwritable()}}})


def test_dvc_alone_empties_the_file_when_a_dump_fails(tmp_path):
    """The failure the fix is for, run in a process of its own (the fix patches DVC for its whole process)."""
    lock = tmp_path / "dvc.lock"
    lock.write_text(LOCK)
    code = ("import sys; from dvc.utils.serialize import dump_yaml\n"
            "try: dump_yaml(sys.argv[1], {'stages': {'x': object()}})\nexcept Exception: pass\n")
    subprocess.run([sys.executable, "-c", code, str(lock)], check=True)
    assert lock.read_text() == ""


def test_a_failed_dump_keeps_the_old_lock_whole_and_leaves_no_temporary(tmp_path):
    from da3_litert_farm.ops.atomic_dvc import install

    install()
    lock = tmp_path / "dvc.lock"
    lock.write_text(LOCK)
    _failing_dump(lock)
    assert lock.read_text() == LOCK
    with modify_yaml(lock) as data:  # DVC's read-modify-write, as the bundle stage's lock pruning uses it
        data["stages"]["params"]["cmd"] = "changed"
    assert yaml.safe_load(lock.read_text())["stages"]["params"]["cmd"] == "changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dvc.lock"]


def test_the_module_runs_dvcs_command_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "da3_litert_farm.ops.atomic_dvc", "version"], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    assert "DVC version: 3." in out


def test_a_failed_rwlock_write_keeps_the_old_rwlock_whole(tmp_path, monkeypatch):
    """DVC rewrites .dvc/tmp/rwlock in place as stages take and free locks; killed in that write, it was left empty
    and every later DVC command refused the repository. Through atomic_dvc a failed write keeps the old file."""
    import json

    from dvc import rwlock
    from dvc.fs import LocalFileSystem

    from da3_litert_farm.ops import atomic_dvc

    atomic_dvc.install()
    old = {"read": {}, "write": {"out": {"pid": 1, "cmd": "dvc repro"}}}
    (tmp_path / "rwlock").write_text(json.dumps(old))

    def dump_then_die(lock, fobj):
        fobj.write('{"read": {')  # half a document, then the process dies
        raise KeyboardInterrupt

    monkeypatch.setattr(rwlock.json, "dump", dump_then_die)
    with pytest.raises(KeyboardInterrupt):
        with rwlock._edit_rwlock(str(tmp_path), LocalFileSystem(), False) as lock:
            lock["write"].clear()
    assert json.loads((tmp_path / "rwlock").read_text()) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rwlock", "rwlock.lock"]  # no temporary left


def _repro_with_a_failing_second_stage(folder, dvc: list[str]) -> tuple[bool, bool]:
    """A git+DVC repository whose first stage writes made.txt and whose second fails. Returns (git lists
    made.txt as untracked, .gitignore ignores it) after `dvc repro`."""
    folder.mkdir()
    run = dict(cwd=folder, check=True, capture_output=True, text=True)
    subprocess.run(["git", "init", "-q"], **run)
    subprocess.run([*dvc, "init", "-q"], **run)
    (folder / "dvc.yaml").write_text(
        "stages:\n"
        "  make:\n    cmd: echo built > made.txt\n    outs: [made.txt]\n"
        "  fail:\n    cmd: exit 1\n    deps: [made.txt]\n    outs: [never.txt]\n")
    failed = subprocess.run([*dvc, "repro"], cwd=folder, capture_output=True, text=True)
    assert failed.returncode != 0, failed.stdout + failed.stderr
    assert (folder / "made.txt").read_text() == "built\n"  # the first stage finished and stays built
    untracked = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], **run).stdout.split("\n")
    gitignore = folder / ".gitignore"
    return "?? made.txt" in untracked, gitignore.exists() and "/made.txt" in gitignore.read_text().split("\n")


def test_a_failed_repro_keeps_the_gitignore_entries_of_the_stages_that_finished(tmp_path):
    """DVC alone takes back every .gitignore entry of a repro that failed, so a finished stage's output shows as
    untracked and `git add -A` would commit it; through atomic_dvc the entry stays."""
    dvc_alone = [sys.executable, "-m", "dvc"]
    atomic = [sys.executable, "-m", "da3_litert_farm.ops.atomic_dvc"]
    seen = {"dvc": _repro_with_a_failing_second_stage(tmp_path / "dvc", dvc_alone),
            "atomic_dvc": _repro_with_a_failing_second_stage(tmp_path / "atomic", atomic)}
    assert seen == {"dvc": (True, False), "atomic_dvc": (False, True)}
