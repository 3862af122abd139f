"""Issue 30, item 3: `farm pull` under faults. A pull SIGKILLed at random and at chosen points while it
replaces an older version's files in --out, then rerun; and a pull into a disk too small for the model.

The farm: the fault template published as 0.1.0 (aspects 9x16 and 16x9), then 0.2.0 without 9x16, so
0.2.0's bundle has the same file name as 0.1.0's and other bytes, and its 16x9 model the same bytes and
another sidecar (a rebuild at a new shape would change the file's name, and cost a minute and a half).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from da3_litert_farm.core.fileio import sha256_file
from tests.fault_farm import copy_farm, killed_at_random, publish, rng, run, trials

STAGING = ".farm-pull."
MODES = {"aspect": ("--aspect", "16x9"), "bundle": ("--bundle",)}
CLIENT = (sys.executable, "-m", "da3_litert_farm.client.cli")

# A pull SIGKILLed at a chosen step of placing the files in --out: the os.remove/os.replace calls whose
# target lies directly in OUT are counted, and the process kills itself once POINT of them are done.
KILL_AT = """
import os, signal, sys
from pathlib import Path

out, point = Path(sys.argv[1]).resolve(), int(sys.argv[2])
done = [0]

def counted(real):
    def call(path, *rest, **options):
        paths = [Path(os.fsdecode(p)).resolve() for p in (path, *rest[:1])]  # remove(path), replace(src, dst)
        mine = any(p.parent == out and not p.name.startswith(".farm-pull.") for p in paths)
        if mine and done[0] == point:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            return real(path, *rest, **options)
        finally:
            if mine:
                done[0] += 1
                if done[0] == point:
                    os.kill(os.getpid(), signal.SIGKILL)
    return call

os.remove, os.replace = counted(os.remove), counted(os.replace)
from da3_litert_farm.client.cli import main
sys.exit(main(sys.argv[3:]))
"""
PLACE_POINTS = ["before the old sidecar is removed", "after the old sidecar is removed",
                "after the model is renamed into place", "after the sidecar is renamed into place"]

# The free-space check passes (as on a disk that another writer fills after it), then the disk fills up under
# the download: the first shutil.disk_usage() answers with a terabyte free.
DISK_FILLS_LATER = """
import shutil, sys

real, asked = shutil.disk_usage, []

def first_says_plenty(path):
    usage = real(path)
    if not asked:
        asked.append(path)
        return usage._replace(free=1 << 40)
    return usage

shutil.disk_usage = first_says_plenty
from da3_litert_farm.client.cli import main
sys.exit(main(sys.argv[1:]))
"""


class Client:
    """The published farm and the `farm pull` commands run against it."""

    def __init__(self, root: Path, farm):
        self.root, self.farm = root, farm
        self.tmp = root / "client-tmp"  # the client's TMPDIR: what a SIGKILLed pull leaves outside --out
        self.tmp.mkdir()
        self.env = {**farm.env, "TMPDIR": str(self.tmp)}

    def args(self, version: str, mode: str, out: Path) -> list:
        return ["pull", "--allow-stress", "--allow-unsigned", "--repo", self.farm.root, "--version", version,
                *MODES[mode], "--out", out]

    def pull(self, version: str, mode: str, out: Path, ok: bool = True) -> subprocess.CompletedProcess:
        proc = run([*CLIENT, *self.args(version, mode, out)], cwd=self.root, env=self.env)
        assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
        return proc

    def catalog(self, version: str) -> dict:
        return json.loads(self.farm.git("show", f"catalog/v{version}:artifacts/catalog.json"))


def listing(folder: Path) -> dict[str, str]:
    """Every entry of `folder` (hidden ones too): file name -> sha256, folders -> "folder"."""
    if not folder.exists():
        return {}
    return {p.name: "folder" if p.is_dir() else sha256_file(p) for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def client(fault_template, module_dir) -> Client:
    root = module_dir("faults-pull")
    farm = copy_farm(fault_template, root)
    done = publish(farm)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = farm.params
    del doc["aspects"]["9x16"]
    doc["catalog"]["version"] = "0.2.0"
    farm.set_params(doc)
    farm.repro()
    farm.commit("catalog 0.2.0")
    done = publish(farm)
    assert done.returncode == 0, done.stdout + done.stderr
    return Client(root, farm)


@pytest.fixture(scope="module")
def versions(client) -> dict:
    """Per mode: --out after an uninterrupted pull of 0.1.0 ("old"), of 0.2.0 over it ("new"), and how long
    that second pull took. The new set is checked against the catalog at its tag, not against itself."""
    found = {}
    for mode in MODES:
        old = client.root / "reference" / mode / "old"
        client.pull("0.1.0", mode, old)
        new = client.root / "reference" / mode / "new"
        shutil.copytree(old, new)
        started = time.monotonic()
        client.pull("0.2.0", mode, new)
        seconds = time.monotonic() - started
        old_files, new_files = listing(old), listing(new)
        catalog = client.catalog("0.2.0")
        entry = catalog["bundles"][0] if mode == "bundle" else next(m for m in catalog["models"] if m["aspect"] == "16x9")
        (model,) = [n for n in new_files if n.endswith(".tflite")]
        assert set(new_files) == {model, f"{model}.json"}  # replaced, nothing beside it
        assert new_files[model] == entry["sha256"] == json.loads((new / f"{model}.json").read_text())["sha256"]
        assert json.loads((new / f"{model}.json").read_text())["catalog"]["version"] == "0.2.0"
        assert old_files[f"{model}.json"] != new_files[f"{model}.json"]
        if mode == "bundle":
            assert old_files[model] != new_files[model]  # the same name, other bytes
        found[mode] = {"old": old_files, "new": new_files, "old_dir": old, "seconds": seconds}
    return found


def state(out: Path, old: dict, new: dict) -> tuple[str, list[str]]:
    """What a reader finds in --out: (outcome, problems). A problem is a sidecar beside a model it does not
    describe, a sidecar without its model, or files of neither set."""
    found = listing(out)
    debris = sorted(n for n in found if n.startswith(STAGING))
    files = {n: h for n, h in found.items() if n not in debris}
    problems = []
    for name in files:
        if name.endswith(".tflite.json"):
            model = name.removesuffix(".json")
            if model not in files:
                problems.append(f"{name} without its model")
            elif json.loads((out / name).read_text())["sha256"] != files[model]:
                problems.append(f"{name} describes another model than {model}")
    if files == old:
        outcome = "old files"
    elif files == new:
        outcome = "new files"
    else:
        bare = [n for n in files if n.endswith(".tflite") and f"{n}.json" not in files]
        rest = {n: h for n, h in files.items() if n not in bare}
        if bare and all(old.get(n) == h or new.get(n) == h for n, h in rest.items()):
            model = bare[0]
            which = ("model (the same bytes in both versions)" if old.get(model) == new.get(model) == files[model]
                     else "new model" if files[model] == new.get(model) else "old model")
            outcome = f"{which}, no sidecar yet"
        else:
            outcome = "a mixture"
            problems.append(f"files of neither version: {sorted(files)}")
    return outcome + (" + staging folder left" if debris else ""), problems


@pytest.mark.parametrize("mode", MODES)
def test_a_pull_killed_at_random_then_rerun_ends_with_the_new_set(client, versions, mode, tmp_path, fault_log):
    """SIGKILL `pull --MODE` of 0.2.0 into an --out holding 0.1.0's files at random points over an uninterrupted
    pull's duration. After each kill no sidecar describes another model; a rerun ends with the new set alone."""
    ref = versions[mode]
    fault = f"pull --{mode} killed at a random point (replacing the old version's files)"
    random = rng(fault)
    failures, tmp_before = [], set(client.tmp.iterdir())
    for trial in range(trials()):
        out = tmp_path / f"trial{trial}" / "assets"
        shutil.copytree(ref["old_dir"], out)
        delay = random.uniform(0, ref["seconds"])
        code = killed_at_random([*CLIENT, *client.args("0.2.0", mode, out)], client.root, client.env, delay)
        outcome, problems = state(out, ref["old"], ref["new"])
        if code is not None:
            outcome = f"finished before the kill ({outcome})"
        rerun = run([*CLIENT, *client.args("0.2.0", mode, out)], cwd=client.root, env=client.env)
        after = listing(out)
        lost = any(after.get(n) != h for n, h in ref["new"].items())  # the app's files, after the rerun
        fault_log.add(fault, outcome, consistent=not problems, data_lost=lost)
        print(f"{fault}, trial {trial} at {delay:.2f} s of {ref['seconds']:.2f} s: {outcome}")
        if rerun.returncode != 0 or after != ref["new"]:
            problems.append(f"after the rerun (exit {rerun.returncode}: {rerun.stderr.strip()[-300:]}): "
                            f"{sorted(after)} instead of {sorted(ref['new'])}")
        if problems:
            failures.append(f"trial {trial} (killed at {delay:.2f} s): {'; '.join(problems)}")
    left = sorted(p.name for p in set(client.tmp.iterdir()) - tmp_before)  # DVC's, outside --out: not cleaned
    print(f"{fault}: {len(left)} new entries in the client's TMPDIR ({client.tmp}): {left[:4]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("point", range(len(PLACE_POINTS)))
def test_a_pull_killed_while_placing_is_completed_by_the_next_pull(client, versions, point, tmp_path, fault_log):
    """SIGKILL `pull --bundle` at each step of placing its two files over the old ones. The state it leaves
    pairs no sidecar with another model; the next pull into that --out (of another file) first completes or
    rolls back the interrupted one and removes its staging folder (a rerun of the killed pull: the test above)."""
    ref = versions["bundle"]
    out = tmp_path / "assets"
    shutil.copytree(ref["old_dir"], out)
    killed = run([sys.executable, "-c", KILL_AT, out, point, *client.args("0.2.0", "bundle", out)], cwd=client.root,
                 env=client.env)
    assert killed.returncode == -9, killed.stdout + killed.stderr  # SIGKILLed, not finished
    outcome, problems = state(out, ref["old"], ref["new"])
    fault = "pull --bundle killed at each step of placing its files"
    fault_log.add(fault, f"{PLACE_POINTS[point]}: {outcome}", consistent=not problems)
    print(f"{fault}, {PLACE_POINTS[point]}: {outcome}")
    assert not problems, problems
    assert any(n.startswith(STAGING) for n in listing(out)), "SIGKILL leaves the staging folder"

    client.pull("0.2.0", "aspect", out)  # another file into the same --out
    now = listing(out)
    bundle = ref["new"] if point >= 2 else ref["old"]  # the new model was in place: completed; else rolled back
    assert now == {**bundle, **versions["aspect"]["new"]}, f"{sorted(now)}: {outcome}"


def test_only_a_dead_pulls_staging_is_recovered(tmp_path):
    """recover_staging: a release folder set aside by a killed signed pull goes back; the staging folders of a
    running pull and of an older client (no process id in the name) are left alone."""
    from da3_litert_farm.client.staging import recover_staging

    gone = subprocess.Popen(["true"])
    gone.wait()  # a process id that no process holds now
    out = tmp_path / "assets"
    dead, alive, older = (out / f".farm-pull.{gone.pid}.x1", out / f".farm-pull.{os.getpid()}.x2",
                          out / ".farm-pull.x3")
    for folder in (dead / "r-0.2.0.release.old", dead / "r-0.2.0.release", alive, older):
        folder.mkdir(parents=True)
    (dead / "r-0.2.0.release.old" / "catalog.json").write_text("{}")  # the release folder that was in --out
    (dead / "r-0.2.0.release" / "catalog.json").write_text("{")  # its replacement, half written
    recover_staging(out)
    assert listing(out) == {"r-0.2.0.release": "folder", alive.name: "folder", older.name: "folder"}
    assert (out / "r-0.2.0.release" / "catalog.json").read_text() == "{}"


@contextlib.contextmanager
def tmpfs(folder: Path, megabytes: int):
    """A small disk at `folder` (we run as root), unmounted again whatever happens."""
    folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


NO_SPACE = re.compile(r"^farm pull: not enough space in (?P<out>\S+) for (?P<name>\S+): it needs (?P<need>[\d.]+) MB, "
                      r"the disk holding it has (?P<free>[\d.]+) MB free")


@pytest.mark.parametrize("old_files", [False, True], ids=["fresh-out", "out-with-old-files"])
@pytest.mark.parametrize("when", ["before the download", "mid-download"])
def test_a_disk_too_small_for_the_model_is_named_and_out_left_untouched(client, versions, tmp_path, old_files, when,
                                                                       fault_log):
    """A tmpfs too small for the ~52 MB model: one line naming --out, the space needed and free; --out as it
    was (the old files, or no folder at all) and nothing else on that disk. "mid-download": the free-space
    check is passed and the disk fills up under the download (ENOSPC from a write)."""
    disk = tmp_path / "disk"
    with tmpfs(disk, 70 if old_files else 30):
        out = disk / "assets"
        if old_files:
            shutil.copytree(versions["aspect"]["old_dir"], out)
        before, free_before = listing(disk), shutil.disk_usage(disk).free
        program = ["-c", DISK_FILLS_LATER] if when == "mid-download" else ["-m", "da3_litert_farm.client.cli"]
        proc = run([sys.executable, *program, *client.args("0.2.0", "aspect", out)], cwd=client.root,
                   env=client.env)
        message = proc.stderr.strip()
        entry = next(m for m in client.catalog("0.2.0")["models"] if m["aspect"] == "16x9")
        after, free_after = listing(disk), shutil.disk_usage(disk).free
        untouched = after == before and listing(out) == (versions["aspect"]["old"] if old_files else {})
        outcome = "refused, --out untouched" if proc.returncode == 1 and untouched else f"exit {proc.returncode}"
        fault_log.add(f"disk too small for the pulled model, found {when}", outcome, consistent=untouched,
                      data_lost=old_files and not untouched)
        assert proc.returncode == 1 and "\n" not in message, proc.stdout + message
        found = NO_SPACE.match(message)
        assert found, message
        assert found["out"] == str(out) and found["name"] == "da3-small-litert-small-112-16x9-70x112-fp16.tflite"
        assert float(found["need"]) >= entry["bytes"] / 1e6
        assert abs(float(found["free"]) - free_before / 1e6) < 0.2, (message, free_before)
        assert untouched and free_after == free_before, (sorted(before), sorted(after))
