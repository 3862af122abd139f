"""Publish refusals that need no built farm (the ones that do are in tests/test_publish_pull.py)."""

import shutil
from pathlib import Path

from da3_litert_farm.ops.publish import main

REPO = Path(__file__).resolve().parents[1]


def test_publish_before_any_build_says_to_run_make_farm_in_one_line(tmp_path, monkeypatch, capsys):
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")  # a fresh clone: params, no artifacts/
    monkeypatch.chdir(tmp_path)
    assert main([]) == 1
    err = capsys.readouterr().err
    assert err == ("publish: no catalog is built yet (artifacts/catalog.json does not exist): run `make farm` first, "
                   "then commit and publish as README.md's Publish section says\n")
