"""The timer behind the README's make demo / make test figures (da3_litert_farm.dev.time_command), on a command
whose time and disk are known: it writes 20 MB under a watched folder, waits, removes half."""

from __future__ import annotations

import sys

from da3_litert_farm.dev import figures
from da3_litert_farm.dev.time_command import main, timed

WRITER = """
import os, sys, time
folder = sys.argv[1]
for name in ("a", "b"):
    with open(os.path.join(folder, name), "wb") as f:
        f.write(os.urandom(10_000_000))
        f.flush(); os.fsync(f.fileno())
time.sleep(1.5)
os.remove(os.path.join(folder, "b"))
"""


def test_time_and_disk_of_a_command_are_what_it_did(tmp_path):
    watched = tmp_path / "watched"
    watched.mkdir()
    (watched / "before").write_bytes(b"x" * 4096)  # there before: not counted
    result = timed([sys.executable, "-c", WRITER, str(watched)], [watched], sample_s=0.2)
    assert result["status"] == 0
    assert 1.5 <= result["seconds"] < 30
    assert 20_000_000 <= result["peak_bytes"] < 21_000_000  # both files at once, as sampled during the wait
    assert 10_000_000 <= result["left_bytes"] < 10_500_000  # one left


def test_a_failed_command_is_not_recorded(tmp_path, capsys):
    name = "time-command-test-failure"
    assert main(["--watch", str(tmp_path), "--record", name, "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert not (figures.FIGURES / f"{name}.json").exists()
    captured = capsys.readouterr()
    assert "exit 3" in captured.out and "not recorded: the command failed" in captured.err
