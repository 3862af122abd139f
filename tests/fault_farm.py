"""The fault suite's shared pieces (issue 30): one small built farm, copied per test; the invariants
every fault is checked against; and the log of trials that docs/reliability.md is rendered from.

    FARM_FAULT_TRIALS=N     random kill points per randomized fault (default 2; `make test-long`: 20)
    FARM_FAULTS_RECORD=1    at the end of the run, write docs/figures/reliability.json from the log
                            (`make test-long` sets it), which `python -m da3_litert_farm.dev.figures`
                            renders into docs/reliability.md
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.farm_repo import MODEL, REPO, Farm, light_checks, repo_files

# Three tiny aspects and their bundle: four shipped files of ~50 MB each, enough for a push to be killed
# half-way. test_publish_pull starts from a copy too. The GPU check is skipped here (test_faults_build.py runs it).
ASPECTS = {"9x16": {"ratio": "9:16"}, "3x4": {"ratio": "3:4"}, "16x9": {"ratio": "16:9"}}
TIER = 112
# What a dry-run publish needs: stress weights, no GPU check, no publisher key.
PUBLISH = ("-m", "da3_litert_farm.ops.publish", "--allow-unchecked-gpu", "--allow-stress", "--unsigned")
TRIALS_ENV = "FARM_FAULT_TRIALS"
RECORD_ENV = "FARM_FAULTS_RECORD"


def trials(default: int = 2) -> int:
    """How many random points a randomized fault is tried at in this run."""
    return int(os.environ.get(TRIALS_ENV, default))


def rng(name: str) -> random.Random:
    """A generator seeded by the fault's name and FARM_FAULT_SEED (default 0): a failing trial reruns alike."""
    return random.Random(f"{name}:{os.environ.get('FARM_FAULT_SEED', '0')}")


def build_template(root: Path) -> Farm:
    """A stress-weights farm of ASPECTS built by `dvc repro` and committed as catalog 0.1.0, not published."""
    farm = Farm(root / "farm")
    for f in repo_files():
        (farm.root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, farm.root / f)
    doc = farm.params
    doc["models"] = {MODEL: {"source": "random", "preset": "da3-small", "seed": 0}}
    doc["tiers"] = [TIER]
    doc["aspects"] = dict(ASPECTS)
    doc["validation"]["gpu"] = "skip"
    light_checks(doc)  # where a fault test turns the GPU check on, one mode is enough
    farm.set_params(doc)
    farm.git("init", "-q")
    farm.git("config", "user.email", "t@t")
    farm.git("config", "user.name", "t")
    farm.repro()
    farm.git("add", "-A")
    farm.git("commit", "-qm", "catalog 0.1.0")
    return farm


def copy_farm(template: Farm, dest: Path) -> Farm:
    """A private copy of a built farm (its git repository and DVC cache) at dest/farm; its default DVC
    remote, a folder, is dest/da3-farm-remote (.dvc/config: ../../da3-farm-remote)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "--reflink=auto", str(template.root), str(dest / "farm")], check=True)
    return Farm(dest / "farm")


def run(cmd: list, cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def publish(farm: Farm, *extra: str) -> subprocess.CompletedProcess:
    return run([sys.executable, *PUBLISH, *extra], cwd=farm.root, env=farm.env)


def killed_at_random(cmd: list, cwd: Path, env: dict, delay_s: float) -> int | None:
    """Start `cmd` in a process group of its own, SIGKILL the whole group after `delay_s` seconds (children
    such as `dvc push` or `git push` die with it, as on a power cut). Returns the exit code if it ended first."""
    proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        return proc.wait(delay_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def md5_file(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tags(repo: Path | str) -> dict[str, str]:
    """refs/tags/NAME -> object, as a client of `repo` sees them."""
    out = subprocess.run(["git", "ls-remote", "--tags", "--refs", str(repo)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[1]: line.split()[0] for line in out.splitlines()}


def shipped_objects(repo: Path, rev: str, read: Callable[[str], bytes | None]) -> dict[str, str]:
    """What a client of `rev` fetches, as DVC object ids: each shipped file's md5, from dvc.lock at `rev`; for a
    file inside a directory output (the bundle), the folder's manifest (`<md5>.dir`, itself read with `read` and
    checked by its md5) and the file's md5 listed in it."""
    show = lambda path: subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo, capture_output=True, text=True,
                                       check=True).stdout
    catalog = json.loads(show("artifacts/catalog.json"))
    files = [m["file"] for m in catalog["models"]] + [b["file"] for b in catalog["bundles"]]
    outs = {o["path"]: o["md5"] for stage in yaml.safe_load(show("dvc.lock"))["stages"].values()
            for o in stage.get("outs", [])}
    objects = {}
    for file in files:
        if file in outs:
            objects[file] = outs[file]
            continue
        folder = next(out for out in outs if file.startswith(f"{out}/"))
        objects[f"{folder} manifest"] = outs[folder]
        manifest = read(outs[folder])
        if manifest is not None and hashlib.md5(manifest).hexdigest() == outs[folder].removesuffix(".dir"):
            relpath = Path(file).relative_to(folder).as_posix()
            objects[file] = next(e["md5"] for e in json.loads(manifest) if e["relpath"] == relpath)
    return objects


def remote_problems(repo: Path, read: Callable[[str, str], bytes | None]) -> list[str]:
    """For every catalog version tagged in `repo`: each object a client fetches that the remote committed at
    that tag lacks or holds with other bytes (`read(tag, oid)`: the bytes, or None). Empty when complete."""
    problems = []
    for ref in tags(repo):
        if not ref.startswith("refs/tags/catalog/v"):
            continue
        objects = shipped_objects(repo, ref, lambda oid: read(ref, oid))
        if len(objects) < 4:
            problems.append(f"{ref}: the bundle's manifest is missing or corrupt on the remote")
        for what, oid in objects.items():
            data = read(ref, oid)
            if data is None:
                problems.append(f"{ref}: {what} missing from the remote")
            elif hashlib.md5(data).hexdigest() != oid.removesuffix(".dir"):
                problems.append(f"{ref}: {what} corrupt on the remote")
    return problems


def folder_objects(folder: Path) -> dict[str, Path]:
    """DVC objects in a folder remote, by id (DVC's half-written `.*.tmp` uploads left out)."""
    root = folder / "files" / "md5"
    return {p.parent.name + p.name: p for p in root.glob("*/*") if not p.name.startswith(".")} if root.exists() else {}


def read_folder(folder: Path) -> Callable[[str, str], bytes | None]:
    def read(ref: str, oid: str) -> bytes | None:
        obj = folder_objects(folder).get(oid)
        return obj.read_bytes() if obj else None
    return read



@dataclass
class FaultLog:
    """Every trial of every fault in this run: what happened, whether the state was consistent, data lost."""
    trials: list[dict] = field(default_factory=list)

    def add(self, fault: str, outcome: str, consistent: bool = True, data_lost: bool = False) -> None:
        self.trials.append({"fault": fault, "outcome": outcome, "consistent": consistent, "data_lost": data_lost})

    def rows(self) -> list[dict]:
        """One row per fault: trials, outcomes counted, inconsistent states, trials that lost data."""
        rows = []
        for fault in dict.fromkeys(t["fault"] for t in self.trials):
            mine = [t for t in self.trials if t["fault"] == fault]
            outcomes = Counter(t["outcome"] for t in mine)
            rows.append({"fault": fault, "trials": len(mine),
                         "outcome": "; ".join(f"{o} ({n})" for o, n in outcomes.most_common()),
                         "inconsistent states": sum(not t["consistent"] for t in mine),
                         "data lost": sum(t["data_lost"] for t in mine)})
        return rows


def write_record(log: FaultLog, started: float) -> Path | None:
    """docs/figures/reliability.json from this run's log, when FARM_FAULTS_RECORD is set."""
    if not os.environ.get(RECORD_ENV) or not log.trials:
        return None
    from da3_litert_farm.dev.figures import record

    minutes = (time.monotonic() - started) / 60
    command = (f"FARM_FAULT_TRIALS={trials()} FARM_FAULTS_RECORD=1 python -m pytest tests/test_faults_*.py "
               f"(make test-long; {minutes:.0f} min)")
    return record("reliability", log.rows(), command)
