"""Time a make target as a newcomer runs it, and what it took on disk: the figures the README's front door links to.

    python -m da3_litert_farm.dev.time_command [--watch PATH ...] [--record NAME] -- make demo

Runs the command in the current folder (it inherits the terminal) and prints its wall time, the disk it used at
its peak and what it left. Disk is sampled every few seconds: with --watch, the size of those paths (a file tree
walked, so another process's writes do not count); without, the growth of the used space of the disk holding the
current folder (run it alone). --record NAME writes docs/figures/NAME.json with the commit and the CPU
(da3_litert_farm.dev.figures); a command that fails is not recorded.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from da3_litert_farm.dev import figures

SAMPLE_S = 5.0


def tree_bytes(paths: list[Path]) -> int:
    """Bytes of the files under `paths` (each hard link once), skipping what vanishes while it is walked."""
    total, seen = 0, set()
    for root in paths:
        for folder, _, files in os.walk(root):
            for name in files:
                try:
                    stat = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue
                if (stat.st_dev, stat.st_ino) not in seen:
                    seen.add((stat.st_dev, stat.st_ino))
                    total += stat.st_blocks * 512
    return total


def disk_used(watch: list[Path]) -> int:
    return tree_bytes(watch) if watch else shutil.disk_usage(Path.cwd()).used


def timed(command: list[str], watch: list[Path], sample_s: float = SAMPLE_S) -> dict:
    """Runs `command`; its exit status, wall seconds, and peak and final disk use over the start."""
    start_used = disk_used(watch)
    peak = [start_used]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(sample_s):
            peak[0] = max(peak[0], disk_used(watch))

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.monotonic()
    sampler.start()
    status = subprocess.call(command)
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    end_used = disk_used(watch)
    peak[0] = max(peak[0], end_used)
    return {"status": status, "seconds": seconds, "peak_bytes": peak[0] - start_used,
            "left_bytes": end_used - start_used}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watch", type=Path, action="append", default=[],
                        help="count only the disk under this path (repeatable); default: the whole disk's growth")
    parser.add_argument("--record", metavar="NAME", help="write docs/figures/NAME.json")
    parser.add_argument("command", nargs="+", help="the command, after --")
    args = parser.parse_args(argv)
    result = timed(args.command, args.watch)
    shown = shlex.join(args.command)
    where = ", ".join(map(str, args.watch)) if args.watch else "the disk holding the current folder"
    print(f"{shown}: exit {result['status']}, {result['seconds'] / 60:.1f} min; disk ({where}) "
          f"{result['peak_bytes'] / 1e9:.2f} GB at its peak, {result['left_bytes'] / 1e9:.2f} GB left")
    if result["status"] != 0:
        print("not recorded: the command failed", file=sys.stderr)
        return result["status"]
    if args.record:
        row = {"command": shown, "minutes": round(result["seconds"] / 60, 2),
               "peak disk GB": round(result["peak_bytes"] / 1e9, 2),
               "left on disk GB": round(result["left_bytes"] / 1e9, 2),
               "disk counted": where}
        path = figures.record(args.record, [row], figures.command_line("da3_litert_farm.dev.time_command", argv))
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
