"""Shared fixtures: stress weights, a small shape, and one small converted model per session.

Conversions cost ~30 s each on these CPUs, so the small patched model is converted once
and shared by the lint, quantize and fidelity tests.
"""

from __future__ import annotations

import copy
import os
import time
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from da3_litert_farm.convert.export import convert_to_tflite
from da3_litert_farm.model.mono_depth import MonoDepth
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.model.stress import stress_model
from da3_litert_farm.model.weights import write_hub_layout

from tests.farm_repo import BUNDLE_STAGE, CHECKPOINT_STAGE, SMALL_ASPECTS, Farm, chain, new_farm

SMALL = (126, 224)  # H x W: 9 x 16 patches, landscape
# SwiftShader, a software Vulkan driver without FP16 arithmetic, inside Debian's chromium (which `make test`
# installs for the report's check): the adapter the GPU check must refuse.
SWIFTSHADER_ICD = Path("/usr/lib/chromium/vk_swiftshader_icd.json")

# litert-torch logs with the module-level `logging.info`, which calls logging.basicConfig()
# on first use and binds whatever sys.stderr is then: under pytest, a per-test capture
# stream that is closed afterwards, so a later record (from DVC, say) kills the run.
# A root handler installed up front makes basicConfig a no-op; pytest still captures logs.
logging.getLogger().addHandler(logging.NullHandler())


# The fixtures behind the big builds (whole farms with DVC caches, remotes, clones, venvs), and the
# free space their tests need in the temp folder: a full run's peak use of the disk, sampled with df every
# 20 s during the fresh-clone `.ci/run` of stop 36 (22.5 GB over the start, of which 2.6 GB the venv and some
# the system packages), with a margin. (10 GB, from stop 25's run, let stop 35's CI fill its disk.)
BIG_BUILDS = {"first_build", "module_dir"}
BIG_BUILDS_FREE_GB = 22


# `make test` runs on two pytest-xdist workers (--dist loadfile): each module goes to one worker whole, so its
# module fixtures build once and its tests keep their order; and the modules sharing an expensive session fixture
# go to the same worker, so it too builds once (the scheduler below). xdist's own loadgroup cannot do this with
# pytest 9, whose nodes no longer take the group suffix xdist 3.8 writes into `_nodeid`.
SHARED_SESSION_BUILDS = {
    "first-build": ("test_build.py", "test_farm_e2e.py"),
    "fault-farm": ("test_faults_build.py", "test_faults_inputs.py", "test_faults_publish.py",
                   "test_faults_pull.py", "test_faults_remote.py", "test_npu_delivery.py",
                   "test_publish_pull.py"),
}
WORKER_GROUP = {module: group for group, modules in SHARED_SESSION_BUILDS.items() for module in modules}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with the modules of SHARED_SESSION_BUILDS kept together."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesSharingBuilds(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return WORKER_GROUP.get(Path(module).name, module)

    return ModulesSharingBuilds(config, log)


def pytest_collection_finish(session):
    """Refuse to start tests with big builds on a disk that cannot hold them: a full disk fails a
    DVC stage half-way through with ENOSPC, far from its cause, after many minutes."""
    big = [item for item in session.items if BIG_BUILDS & set(item.fixturenames)]
    if not big:
        return
    folder = tempfile.gettempdir()
    free_gb = shutil.disk_usage(folder).free / 1e9
    if free_gb < BIG_BUILDS_FREE_GB:
        modules = sorted({item.path.name for item in big})
        pytest.exit(f"the tests that build farms ({', '.join(modules)}) need {BIG_BUILDS_FREE_GB} GB free in "
                    f"{folder}, which has {free_gb:.1f} GB: free some space there or point TMPDIR at a roomier "
                    "disk", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory, request) -> Iterator[Callable[[str], Path]]:
    """`tmp_path_factory.mktemp` for a module's shared builds, removed when the module is done:
    a farm with its DVC cache is GBs, and a full run would otherwise keep them all to the end.
    Kept if a test failed, like a failing test's tmp_path (pyproject.toml: retention "failed"), while
    BIG_BUILDS_FREE_GB stay free."""
    made: list[Path] = []

    def make(name: str) -> Path:
        made.append(tmp_path_factory.mktemp(name))
        return made[-1]

    yield make
    # A failure keeps them only while the disk can spare them: kept builds after an early failure
    # filled a CI disk (stop 35), turning one failure into a hundred ENOSPC errors.
    roomy = shutil.disk_usage(tempfile.gettempdir()).free / 1e9 >= BIG_BUILDS_FREE_GB
    if not (request.session.testsfailed and roomy):
        for path in made:
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def stress_net() -> torch.nn.Module:
    """Official DA3-Small with seed-0 stress weights. Do not modify: use `fresh_net`."""
    torch.set_num_threads(2)
    return stress_model(seed=0)


@pytest.fixture
def fresh_net(stress_net):
    """A private copy of the stress model that a test may rewrite in place."""
    return copy.deepcopy(stress_net)


@pytest.fixture(scope="session")
def stress_checkpoint_dir(tmp_path_factory, stress_net):
    """The stress model written as a Hub-layout checkpoint directory."""
    directory = tmp_path_factory.mktemp("stress-ckpt")
    write_hub_layout(directory, stress_net)
    return directory


@pytest.fixture(scope="session")
def small_tflite(tmp_path_factory, stress_net):
    """The patched model at SMALL converted to FP32 and FP16 .tflite files: (fp32, fp16)."""
    out = tmp_path_factory.mktemp("small-tflite")
    mono = MonoDepth(copy.deepcopy(stress_net), *SMALL).eval()
    fp32, fp16 = out / "model_fp32.tflite", out / "model_fp16.tflite"
    convert_to_tflite(mono, *SMALL, fp32)
    quantize_fp16(fp32, fp16)
    return fp32, fp16


@dataclass(frozen=True)
class FirstBuild:
    farm: Farm  # test_farm_e2e goes on editing it
    lock: dict  # dvc.lock and the catalog as the first `dvc repro` left them
    catalog: dict


@pytest.fixture(scope="session")
def first_build(tmp_path_factory, stress_net) -> FirstBuild:
    """Two small aspects built from nothing by a plain sequential `dvc repro` (no NPU files: test_npu_delivery.py
    builds those)."""
    farm = new_farm(tmp_path_factory.mktemp("farm"), stress_net, SMALL_ASPECTS)
    ran, _ = farm.repro()
    assert ran == {"params", CHECKPOINT_STAGE, BUNDLE_STAGE, "catalog", "report"} | chain("a", "b")
    return FirstBuild(farm, farm.lock(), farm.catalog())


@pytest.fixture(scope="session")
def fault_template(tmp_path_factory):
    """The fault suite's built farm (tests/fault_farm.py), built once; tests take copies (copy_farm).
    FARM_FAULT_TEMPLATE=DIR reuses one built earlier at DIR/farm, for iterating on the suite."""
    from tests.fault_farm import build_template

    prebuilt = os.environ.get("FARM_FAULT_TEMPLATE")
    if prebuilt:
        return Farm(Path(prebuilt) / "farm")
    return build_template(tmp_path_factory.mktemp("fault-template"))


@pytest.fixture(scope="session")
def fault_log():
    """Every fault trial of the run; written to docs/figures/reliability.json at the end when FARM_FAULTS_RECORD
    is set (make test-long)."""
    from tests.fault_farm import FaultLog, write_record

    started = time.monotonic()
    log = FaultLog()
    yield log
    write_record(log, started)
