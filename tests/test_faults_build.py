"""Builds under faults (issue 30): a build SIGKILLed inside a stage resumes there and ends with the bytes of
an uninterrupted build; two builds started at once in one checkout: the second is refused, the first finishes.

The builds run `make farm`'s command (farm_lock, then DVC with atomic lock writes) on one aspect. make test kills
one build at a random point in bundle and catalog in turn (each rerun is the next trial) and starts two `make farm`
at once; with FARM_FAULT_TRIALS >= 20 (make test-long) the GPU check is on (Mesa's lavapipe here), export@ and gpu@
join the kill points, two chains of them, and `make farm JOBS=2` joins the concurrent pairs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from da3_litert_farm.core.fileio import sha256_file
from tests.fault_farm import TIER, copy_farm, md5_file, rng, trials
from tests.farm_repo import MODEL, Farm, ran_stages, restored_stages

ASPECT = "9x16"
CELL, BUNDLE = f"{MODEL}-{TIER}-{ASPECT}", f"{MODEL}-{TIER}"  # the one cell the builds under test hold
# What `make farm` runs (without JOBS).
BUILD = ("-m", "da3_litert_farm.ops.farm_lock", sys.executable, "-m", "da3_litert_farm.ops.farm_repro")
# Fields that differ between two uninterrupted builds of the same inputs: wall-clock times and memory
# figures (export.json, metrics.json's CPU inference time, gpu.json, bundle.json and the catalog's copies of
# them) and the catalog's `created` time. Every other field, and every binary output, is byte-identical.
VARIES = {"seconds", "load_seconds", "peak_rss_mb", "peak_rss_mib", "peak_growth_mib", "rss_before_mib", "created",
          "ms", "cpu_ms", "gpu_seconds", "export_seconds", "export_peak_rss_mib"}
LONG = trials() >= 20


class Build:
    """A build in a process group of its own (SIGKILLed whole, as on a power cut); its output read as it comes."""

    def __init__(self, farm: Farm, *args: str):
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, *(args or BUILD)], cwd=farm.root,
                                     env={**farm.env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))

    @property
    def output(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def wait_for(self, text: str, timeout: float = 600) -> bool:
        """Until a line holds `text` (True) or the build ends without one (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for _, line in list(self.lines)):
                return True
            if self.proc.poll() is not None:
                self._reader.join()
                return any(text in line for _, line in self.lines)
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} in {timeout:.0f} s:\n{self.output[-3000:]}")

    def kill(self) -> bool:
        """SIGKILL the whole group; False if the build had ended by itself."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.finish() == -signal.SIGKILL

    def finish(self, timeout: float = 900) -> int:
        code = self.proc.wait(timeout)
        self._reader.join()
        return code

    def stage_spans(self) -> dict[str, float]:
        """Seconds from each `Running stage` line to DVC's `Updating lock file` after it (run and recorded)."""
        spans, current = {}, None
        for t, line in self.lines:
            if m := re.match(r"Running stage '([^']+)'", line):
                current = (m.group(1), t)
            elif line.startswith("Updating lock file") and current:
                spans[current[0]] = t - current[1]
                current = None
        return spans

    def started_stages(self) -> list[str]:
        return re.findall(r"Running stage '([^']+)'", self.output)


def pre_build(template: Farm, dest: Path, long: bool) -> Farm:
    """A copy of the template whose next build runs bundle, catalog and report on one aspect; `long`: the GPU
    check first (validation.gpu: required), and before it export@ again (an edit to the export stage's code)."""
    farm = copy_farm(template, dest)
    doc = farm.params
    doc["aspects"] = {ASPECT: doc["aspects"][ASPECT]}
    if long:
        doc["validation"]["gpu"] = "required"
    farm.set_params(doc)
    if long:
        with open(farm.root / "stages" / "export.py", "a") as f:
            f.write("# an edit: export@ runs again\n")
    farm.commit("the build under test")
    return farm


def masked(doc):
    """A JSON document without the fields that vary between builds (VARIES)."""
    if isinstance(doc, dict):
        return {k: masked(v) for k, v in doc.items() if k not in VARIES}
    if isinstance(doc, list):
        return [masked(v) for v in doc]
    return doc


def build_state(farm: Farm) -> dict[str, object]:
    """Every file under artifacts/models/ and artifacts/bundles/, and catalog.json: sha256, or for JSON the document
    less VARIES; and dvc.lock, whose md5 of a JSON file, a folder (which holds JSON files) or the report page (which
    shows the stage times) is dropped."""
    art = farm.root / "artifacts"
    state = {}
    for path in sorted([*(art / "models").rglob("*"), *(art / "bundles").rglob("*"), art / "catalog.json"]):
        if path.is_file():
            key = str(path.relative_to(farm.root))
            state[key] = masked(json.loads(path.read_text())) if path.suffix == ".json" else sha256_file(path)
    lock = yaml.safe_load((farm.root / "dvc.lock").read_text())
    for entry in lock["stages"].values():
        for item in [*entry.get("deps", []), *entry.get("outs", [])]:
            if item["path"].endswith((".json", ".html")) or item.get("md5", "").endswith(".dir"):
                for key in ("md5", "size", "nfiles", "hash"):
                    item.pop(key, None)
    state["dvc.lock"] = lock
    return state


def lock_problems(farm: Farm) -> list[str]:
    """Each file output whose md5 in dvc.lock is not the md5 of the file on disk (recomputed here)."""
    problems = []
    for name, entry in yaml.safe_load((farm.root / "dvc.lock").read_text())["stages"].items():
        for out in entry.get("outs", []):
            path = farm.root / out["path"]
            if not out["md5"].endswith(".dir") and (not path.is_file() or md5_file(path) != out["md5"]):
                problems.append(f"{name}: {out['path']}")
    return problems


def differences(a: dict, b: dict) -> list[str]:
    """The files that differ; for dvc.lock, its stages that do."""
    found = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and k != "dvc.lock"]
    stages_a, stages_b = a["dvc.lock"]["stages"], b["dvc.lock"]["stages"]
    return found + [f"dvc.lock {name}" for name in sorted(set(stages_a) | set(stages_b))
                    if stages_a.get(name) != stages_b.get(name)]


def test_build_killed_in_a_stage_resumes_there_with_the_same_bytes(fault_template, tmp_path, fault_log):
    """SIGKILL the build at a random point inside a stage; the rerun, with no cleanup, starts at that stage
    (every stage before it stays built) and the last rerun ends byte-identical to an uninterrupted build."""
    targets = [f"export@{CELL}", f"gpu@{CELL}"] * LONG + [f"bundle@{BUNDLE}", "catalog"]
    chains = 2 if LONG else 1  # each chain is four builds with the GPU check on: minutes each
    pre = pre_build(fault_template, tmp_path / "pre", long=LONG)
    reference = Build(copy_farm(pre, tmp_path / "reference"))
    assert reference.finish() == 0, reference.output[-3000:]
    order, spans = reference.started_stages(), reference.stage_spans()
    assert order == ["params", *targets, "report"], order
    expected = build_state(Farm(tmp_path / "reference" / "farm"))
    random = rng("build killed in a stage")
    for n in range(chains):
        farm = copy_farm(pre, tmp_path / f"chain{n}")
        starts = {0}  # where in `order` the next build may start: the first stage not yet recorded in dvc.lock
        kills = []  # [target, the stage the kill hit, the stage the next build started at, whether it should]
        for target in targets:
            if order.index(target) < min(starts):
                continue  # an earlier kill landed past this stage
            build = Build(farm)
            assert build.wait_for(f"Running stage '{target}'"), build.output[-3000:]
            time.sleep(random.uniform(0.05, 0.95) * spans[target])
            killed = build.kill()
            started = build.started_stages()
            if kills:
                kills[-1][2:] = [started[0], order.index(started[0]) in starts]
            kills.append([target, started[-1], None, None])
            # DVC prints this line as it records the stage: killed right after it, the stage may or may not be.
            recording = build.output.rstrip().endswith("Updating lock file 'dvc.lock'")
            starts = {order.index(started[-1]) + i for i in range(1 + recording)} if killed else {len(order)}
        final = Build(farm)
        assert final.finish() == 0, final.output[-3000:]  # no stale lock: no cleanup between the runs
        redone = ran_stages(final.output) | restored_stages(final.output)
        resumed = any(redone == set(order[s:]) for s in starts)
        kills[-1][2:] = [next((st for st in order if st in redone), None), resumed]
        diff = differences(build_state(farm), expected)
        problems = lock_problems(farm)
        status = farm.dvc("status")
        consistent = not diff and not problems and "up to date" in status
        for target, hit, first, ok in kills:
            fault_log.add(f"dvc repro killed (SIGKILL) at a random point in {target.split('@')[0]}",
                          "rerun resumed there, same bytes" if ok and consistent else
                          f"killed in {hit}: rerun started at {first}; differs: {', '.join(diff) or 'nothing'}",
                          consistent=ok and consistent)
            assert ok, f"chain {n}: after a kill in {hit} the rerun started at {first} (order {order})"
        assert resumed, f"chain {n}: the last rerun redid {sorted(redone)}, expected from {order[min(starts)]} on"
        assert not diff, f"chain {n}: differs from an uninterrupted build: {diff}"
        assert not problems, f"dvc.lock's md5 is not the file's: {problems}"
        assert "up to date" in status, status


def cheap_build(template: Farm, dest: Path) -> Farm:
    """A copy whose next build runs only params, catalog and report (a new catalog version): seconds."""
    farm = copy_farm(template, dest)
    doc = farm.params
    doc["catalog"]["version"] = "0.1.1"
    farm.set_params(doc)
    farm.commit("catalog 0.1.1")
    return farm


PARALLEL = ("-m", "da3_litert_farm.ops.build", "--jobs", "2")


def test_second_build_in_a_checkout_is_refused_and_the_first_finishes(fault_template, tmp_path, fault_log):
    """`make farm` twice at once, and `make farm JOBS=2` against `make farm`: the second is refused at once
    by the farm lock, naming the first build's pid and command; the first ends as a build alone would."""
    pairs = [(BUILD, BUILD), (PARALLEL, BUILD), (BUILD, PARALLEL)] if LONG else [(BUILD, BUILD)]
    for n, (first, second) in enumerate(pairs):
        farm = cheap_build(fault_template, tmp_path / f"pair{n}")
        a = Build(farm, *first)
        assert a.wait_for("Running stage 'params'" if first == BUILD else "build: "), a.output  # it holds the lock
        b = subprocess.run([sys.executable, *second], cwd=farm.root, env=farm.env, capture_output=True, text=True,
                           timeout=120)
        a_code = a.finish()
        refused = b.returncode == 1 and f"pid {a.proc.pid}," in b.stderr and "another build is running" in b.stderr
        status = farm.dvc("status")
        consistent = a_code == 0 and "up to date" in status and farm.catalog()["version"] == "0.1.1" \
            and not lock_problems(farm)
        names = {BUILD: "make farm", PARALLEL: "make farm JOBS=2"}
        fault_log.add(f"{names[second]} started while {names[first]} runs in the same checkout",
                      "refused: another build is running (its pid named); the first finished" if refused and consistent
                      else f"second exit {b.returncode}: {b.stderr.strip()[-200:]}", consistent=consistent)
        assert refused, (b.returncode, b.stdout[-2000:], b.stderr[-2000:])
        assert consistent, (a_code, a.output[-3000:], status)
