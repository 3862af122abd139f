"""The parallel build (da3_litert_farm.ops.build) on a real Dask LocalCluster of 2 workers.

One farm, tests in file order: two cells from nothing (compared with the sequential
`dvc repro` of the same inputs in conftest's first_build), a build in which one aspect's
converter is killed, and workers that share no DVC cache, only a local-directory remote.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from da3_litert_farm.core import paths
from da3_litert_farm.core.fileio import sha256_file
from tests.farm_repo import BUNDLE_STAGE, CHECKPOINT_STAGE, MODEL, SMALL_ASPECTS, Farm, cell, chain, new_farm, \
    restored_stages

# Inputs and outputs that two builds of the same inputs write byte for byte. The others record
# wall times, or hold the official PyTorch FP32 depth, which torch on the CPU does not compute
# bit-identically from one process to the next (depth.npz differed by up to 8e-6; the figures
# measured against it by up to 0.1 %), or are torch.export archives (patched.pt2).
SAME_BYTES = re.compile(r"^(da3_litert_farm/|checkpoints$|artifacts/checkpoints/\w+$|artifacts/params)"
                        r"|\.tflite$|/lint\.json$|/gpu_depth\.npz$")
LINE = re.compile(r"build: ([\w.-]+) on \S+ \(pid \d+\): ran (.+?); convert ([\d.]+)-([\d.]+) s, "
                  r"GPU check ([\d.]+)-([\d.]+) s")


@pytest.fixture(scope="module")
def farm(module_dir, stress_net) -> Farm:
    return new_farm(module_dir("parallel"), stress_net, SMALL_ASPECTS)


def build(farm: Farm, *args: str, expect_ok: bool = True) -> tuple[dict[str, dict], str]:
    output = farm.run("-m", "da3_litert_farm.ops.build", "--jobs", "2", *args, expect_ok=expect_ok)
    return parse(output), output


def parse(output: str) -> dict[str, dict]:
    """Per cell: the stages its worker ran, and when it converted and GPU-checked."""
    return {m[1]: {"ran": set() if m[2].startswith("nothing") else set(m[2].split(", ")),
                   "convert": (float(m[3]), float(m[4])), "gpu": (float(m[5]), float(m[6]))}
            for m in LINE.finditer(output)}


def final_repro(output: str) -> tuple[int, set[str]]:
    """What the build's closing `dvc repro` here did: (stages restored from the run-cache, stages run)."""
    m = re.search(r"build: dvc repro here restored (\d+) stages from the run-cache and ran (.+?);", output)
    return int(m[1]), set() if m[2] == "nothing" else set(m[2].split(", "))


def entries(stage: dict) -> dict[str, str | None]:
    return {e["path"]: e.get("md5") for e in stage.get("deps", []) + stage.get("outs", [])}


def without_times(catalog: dict) -> dict:
    catalog = {k: v for k, v in catalog.items() if k != "created"}
    catalog["models"] = [{**{k: v for k, v in m.items() if k != "cost"},  # measured times and memory
                          "gpu": {k: v for k, v in m["gpu"].items() if k != "seconds"}} for m in catalog["models"]]
    catalog["bundles"] = [{k: v for k, v in b.items() if k != "load"} for b in catalog["bundles"]]  # measured
    return catalog


def assert_close(ours, theirs, where: str = "catalog") -> None:
    """Equal, but for floats measured against the official FP32 reference: 0.5 % apart at most
    (Pearson and cosine, near 1, as 1 - x)."""
    if isinstance(theirs, dict):
        assert ours.keys() == theirs.keys(), where
        for k in theirs:
            assert_close(ours[k], theirs[k], f"{where}.{k}")
    elif isinstance(theirs, list):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_close(a, b, f"{where}[{i}]")
    elif isinstance(theirs, float):
        a, b = (1 - ours, 1 - theirs) if 0.9 < theirs <= 1 else (ours, theirs)
        assert a == pytest.approx(b, rel=5e-3, abs=1e-12), (where, ours, theirs)
    else:
        assert ours == theirs, where


def test_two_workers_leave_what_a_sequential_repro_leaves(farm, first_build):
    aspects, output = build(farm)
    assert set(aspects) == {cell("a"), cell("b")}
    for name, a in aspects.items():
        assert a["ran"] == chain(name.rsplit("-", 1)[1]), output
    # The GPU check had the machine to itself: no other conversion or GPU check overlapped it.
    for name, a in aspects.items():
        g0, g1 = a["gpu"]
        for other, o in aspects.items():
            spans = [o["convert"], o["gpu"]] if other != name else [o["convert"]]
            for s0, s1 in spans:
                assert g1 <= s0 + 0.1 or g0 >= s1 - 0.1, (name, other, aspects)
    # The final `dvc repro` here restored every cell from the run-cache and converted nothing.
    assert final_repro(output) == (12, {BUNDLE_STAGE, "catalog", "report"}), output  # 2 cells x 6 stages

    lock, sequential = farm.lock(), first_build.lock
    assert list(lock) == list(sequential)
    compared = []
    for name, stage in sequential.items():
        assert lock[name]["cmd"] == stage["cmd"] and lock[name].get("params") == stage.get("params"), name
        ours, theirs = entries(lock[name]), entries(stage)
        assert ours.keys() == theirs.keys(), name
        compared += [path for path in theirs if SAME_BYTES.search(path)]
        assert {p: ours[p] for p in theirs if SAME_BYTES.search(p)} == \
               {p: md5 for p, md5 in theirs.items() if SAME_BYTES.search(p)}, name
    assert {paths.checkpoint_dir(MODEL).as_posix(), paths.fp16_model(cell("a")).as_posix(),
            paths.gpu_depth(cell("b")).as_posix()} <= set(compared)
    assert_close(without_times(farm.catalog()), without_times(first_build.catalog))
    ran, status = farm.repro()
    assert ran == set() and "up to date" in status


def test_a_killed_aspect_fails_the_build_and_keeps_the_others(farm):
    catalog_before = (farm.root / "artifacts/catalog.json").read_bytes()
    farm.add_aspects(c={"ratio": "2:1"}, d={"ratio": "4:1"})  # 112x224 and 56x224: small, quick
    proc = subprocess.Popen([sys.executable, "-m", "da3_litert_farm.ops.build", "--jobs", "2"], cwd=farm.root,
                            env=farm.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = kill_when_running(["stages.export", cell("d")], proc)
    output = proc.communicate()[0]
    assert killed and proc.returncode == 1, output
    # -9 where DVC's shell execs the command, 137 (128 + SIGKILL) where the shell forks and reports it.
    d = re.escape(cell("d"))
    assert re.search(rf"build {d}: FAILED export@{d} on \S+: `.*dvc repro --single-item export@{d}` failed "
                     rf"\(exit \d+\):.*failed to run: python -m stages.export {d}, exited with (-9|137)", output,
                     re.S), output
    assert f"1 of 4 cells failed ({cell('d')}); artifacts/ untouched" in output, output
    assert parse(output)[cell("c")]["ran"] == chain("c")
    # Nothing reached artifacts/: c waits in the cache, the catalog is the last good one.
    assert not (farm.root / paths.cell_dir(cell("c"))).exists() and not (farm.root / paths.cell_dir(cell("d"))).exists()
    assert (farm.root / "artifacts/catalog.json").read_bytes() == catalog_before

    aspects, output = build(farm)  # converts only what failed
    assert aspects[cell("a")]["ran"] == aspects[cell("b")]["ran"] == aspects[cell("c")]["ran"] == set()
    assert aspects[cell("d")]["ran"] == chain("d") - {f"patch@{cell('d')}"}  # patch had finished before the kill
    assert [m["aspect"] for m in farm.catalog()["models"]] == ["a", "b", "c", "d"]


def kill_when_running(cmdline: list[str], build_proc: subprocess.Popen, timeout_s: float = 900) -> bool:
    """SIGKILL the process whose command line ends with `cmdline`, once it is running."""
    deadline = time.time() + timeout_s
    while time.time() < deadline and build_proc.poll() is None:
        for p in psutil.process_iter(["cmdline"]):
            if (p.info["cmdline"] or [])[-len(cmdline):] == cmdline:
                time.sleep(1.0)  # well into the conversion
                p.send_signal(signal.SIGKILL)
                return True
        time.sleep(0.2)
    return False


def test_workers_without_a_shared_cache_build_through_the_remote(farm, tmp_path):
    remote = tmp_path / "remote"
    farm.dvc("remote", "add", "-d", "-f", "storage", str(remote))
    farm.commit("a, b, c, d built; a local-directory DVC remote")
    farm.dvc("push")
    farm.dvc("push", "--run-cache")

    # A second clone converts nothing: `dvc repro --pull` restores every stage from the remote's run-cache.
    clone = Farm(tmp_path / "clone")
    subprocess.run(["git", "clone", "-q", str(farm.root), str(clone.root)], check=True)
    shutil.copytree(farm.root / "checkpoints/stress", clone.root / "checkpoints/stress")  # the local checkpoint
    (clone.root / "dvc.lock").unlink()  # nothing to go by but the run-cache
    ran, output = clone.repro("--pull")
    assert ran == {"params", "catalog", "report"}, output
    assert restored_stages(output) == {CHECKPOINT_STAGE, BUNDLE_STAGE} | chain("a", "b", "c", "d")
    assert sha256_file(clone.root / paths.fp16_model(cell("d"))) == farm.file_hashes(cell("d"))["model_fp16.tflite"]

    # Workers clone the repository at this commit into folders of their own (own DVC cache) and
    # go through the remote; a new aspect is converted, the rest come from the remote's run-cache.
    clone.add_aspects(e={"ratio": "1:4"})  # 224x56
    clone.commit("aspect e")
    shutil.rmtree(clone.root / ".dvc/cache")  # the coordinator too starts from the remote alone
    aspects, output = build(clone, "--workspace", "clone", "--repo-url", str(clone.root))
    assert aspects[cell("e")]["ran"] == chain("e"), output
    assert all(aspects[cell(a)]["ran"] == set() for a in "abcd"), output
    assert final_repro(output)[1] <= {"params", BUNDLE_STAGE, "catalog", "report"}, output
    assert [m["aspect"] for m in clone.catalog()["models"]] == ["a", "b", "c", "d", "e"]
    e_files = {m["aspect"]: m for m in clone.catalog()["models"]}["e"]
    assert sha256_file(clone.root / e_files["file"]) == e_files["sha256"]
