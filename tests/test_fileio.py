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
