import os
import stat

import pytest

from da3_litert_farm.core import fileio


def test_atomic_write_replaces_whole_file_with_normal_permissions(tmp_path):
    target = tmp_path / "out" / "m.json"
    fileio.write_json(target, {"a": 1})
    fileio.write_json(target, {"a": 2})
    assert target.read_text() == '{\n  "a": 2\n}\n'
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in target.parent.iterdir()] == ["m.json"]


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "model.tflite"
    target.write_bytes(b"good")
    with pytest.raises(RuntimeError):
        with fileio.atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("converter crashed")
    assert target.read_bytes() == b"good"
    assert [p.name for p in tmp_path.iterdir()] == ["model.tflite"]


def test_atomic_dir_swaps_a_directory_whole(tmp_path):
    target = tmp_path / "checkpoint"
    with fileio.atomic_dir(target) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(ValueError):
        with fileio.atomic_dir(target) as tmp:
            (tmp / "b").write_text("2")
            raise ValueError("download failed")
    assert [p.name for p in target.iterdir()] == ["a"]
    with fileio.atomic_dir(target) as tmp:
        (tmp / "c").write_text("3")
    assert [p.name for p in target.iterdir()] == ["c"]
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint"]


def test_sha256_file(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"abc")
    assert fileio.sha256_file(f) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def _fail_second_rename(monkeypatch):
    """Make the second rename (os.rename or os.replace) of the call raise, as a crash there would stop it."""
    calls = []
    real_rename, real_replace = os.rename, os.replace

    def rename(real):
        def wrapped(src, dst, *args, **kwargs):
            calls.append((src, dst))
            if len(calls) == 2:
                raise OSError("simulated crash between the renames")
            return real(src, dst, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(os, "rename", rename(real_rename))
    monkeypatch.setattr(os, "replace", rename(real_replace))
    return calls


def test_atomic_dir_swaps_in_one_step_here(tmp_path):
    # This machine (Linux) swaps with renameat2: the destination is never missing, not even for a moment.
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "x").write_text("from a")
    assert fileio._exchange(a, b)
    assert [p.name for p in a.iterdir()] == [] and (b / "x").read_text() == "from a"


def test_a_failure_between_the_renames_leaves_the_new_directory_in_place(tmp_path, monkeypatch):
    target = tmp_path / "checkpoint"
    target.mkdir()
    (target / "old").write_text("1")
    _fail_second_rename(monkeypatch)
    with fileio.atomic_dir(target) as tmp:
        (tmp / "new").write_text("2")
    assert [p.name for p in target.iterdir()] == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint"]


def test_without_the_swap_a_failure_between_the_renames_keeps_the_old_directory(tmp_path, monkeypatch):
    target = tmp_path / "checkpoint"
    target.mkdir()
    (target / "old").write_text("1")
    monkeypatch.setattr(fileio, "_exchange", lambda a, b: False)  # as on a system without renameat2
    _fail_second_rename(monkeypatch)
    with pytest.raises(OSError, match="simulated crash between the renames"):
        with fileio.atomic_dir(target) as tmp:
            (tmp / "new").write_text("2")
    assert [p.name for p in target.iterdir()] == ["old"]
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint"]


def test_without_the_swap_a_crash_between_the_renames_is_undone_by_the_next_call(tmp_path, monkeypatch):
    target = tmp_path / "checkpoint"
    target.mkdir()
    (target / "old").write_text("1")
    pid = os.fork()
    if pid == 0:  # the child dies for real at the second rename: no except or finally runs
        try:
            fileio._exchange = lambda a, b: False
            real_rename, calls = os.rename, []

            def rename(src, dst):
                calls.append(src)
                if len(calls) == 2:
                    os._exit(17)
                real_rename(src, dst)

            os.rename = rename
            with fileio.atomic_dir(target) as tmp:
                (tmp / "new").write_text("2")
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 17
    assert not target.exists()  # the window that renameat2 closes
    with pytest.raises(ValueError, match="download failed"):
        with fileio.atomic_dir(target):
            raise ValueError("download failed")
    assert [p.name for p in target.iterdir()] == ["old"]
    assert not (tmp_path / ".checkpoint.old").exists()


def test_atomic_writes_never_change_the_umask(tmp_path, monkeypatch):
    real_umask = os.umask
    previous = real_umask(0o027)
    try:
        def umask(mask):
            if mask != 0o027:
                raise AssertionError(f"umask set to {mask:o}: process-wide, races other threads")
            return real_umask(mask)

        monkeypatch.setattr(os, "umask", umask)
        fileio.write_json(tmp_path / "m.json", {"a": 1})
        with fileio.atomic_dir(tmp_path / "d") as tmp:
            (tmp / "x").write_text("1")
        with fileio.atomic_dir(tmp_path / "d") as tmp:  # replacing, not only creating
            (tmp / "y").write_text("1")
    finally:
        real_umask(previous)
    assert stat.S_IMODE((tmp_path / "m.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o750
