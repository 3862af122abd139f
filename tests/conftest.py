"""Shared fixtures: stress weights, a small shape, and one small converted model per session.

Conversions cost ~30 s each on these CPUs, so the small patched model is converted once
and shared by the lint, quantize and fidelity tests.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import pytest
import torch

from da3_litert_farm.convert.export import convert_to_tflite
from da3_litert_farm.model.mono_depth import MonoDepth
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.model.stress import stress_model
from da3_litert_farm.model.weights import write_hub_layout

from tests.farm_repo import SMALL_ASPECTS, Farm, chain, new_farm

SMALL = (126, 224)  # H x W: 9 x 16 patches, landscape

# litert-torch logs with the module-level `logging.info`, which calls logging.basicConfig()
# on first use and binds whatever sys.stderr is then: under pytest, a per-test capture
# stream that is closed afterwards, so a later record (from DVC, say) kills the run.
# A root handler installed up front makes basicConfig a no-op; pytest still captures logs.
logging.getLogger().addHandler(logging.NullHandler())


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
    """Two small aspects built from nothing by a plain sequential `dvc repro`."""
    farm = new_farm(tmp_path_factory.mktemp("farm"), stress_net, SMALL_ASPECTS)
    ran, _ = farm.repro()
    assert ran == {"params", "checkpoint", "bundle", "catalog", "report"} | chain("a", "b")
    return FirstBuild(farm, farm.lock(), farm.catalog())
