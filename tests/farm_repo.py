"""A temporary copy of the repository in which tests run the real farm, as a user would."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import yaml

from da3_litert_farm.core import paths
from da3_litert_farm.core.cells import bundle_name, cell_name
from da3_litert_farm.core.fileio import sha256_file
from da3_litert_farm.core.pipeline import cell_stages, stage_name
from da3_litert_farm.model.weights import write_hub_layout

REPO = Path(__file__).resolve().parents[1]
MODEL = "small"  # the one model of the tests' farms
SMALL_TIER = 224
SMALL_ASPECTS = {"a": {"ratio": "16:9"}, "b": {"ratio": "9:16"}}  # at SMALL_TIER: 126x224, 224x126


def run_stage(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run stages/<name>.py as DVC does (`python -m stages.NAME`), in `cwd`, with this checkout's code."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    return subprocess.run([sys.executable, "-m", f"stages.{name}", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)


def cell(aspect: str, tier: int = SMALL_TIER, model: str = MODEL) -> str:
    """The cell of an aspect of the tests' farms: MODEL-TIER-ASPECT."""
    return cell_name(model, tier, aspect)


BUNDLE_STAGE = stage_name("bundle", bundle_name(MODEL, SMALL_TIER))  # the tests' farms' one bundle
CHECKPOINT_STAGE = stage_name("checkpoint", MODEL)


def chain(*aspects: str, tier: int = SMALL_TIER) -> set[str]:
    """Every per-cell stage of these aspects' cells at one tier of the tests' model."""
    return {name for a in aspects for name in cell_stages(cell(a, tier))}


def repo_files() -> list[str]:
    """The files a fresh clone has (tracked, plus new files git does not ignore)."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    return [f for f in out.splitlines() if (REPO / f).is_file() and not f.startswith(("artifacts/", "tests/"))]


def ran_stages(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


def restored_stages(output: str) -> set[str]:
    """Stages DVC took from its run-cache instead of running."""
    return set(re.findall(r"Stage '([^']+)' is cached - skipping run", output))


class Farm:
    def __init__(self, root: Path):
        self.root = root
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                    "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1"}

    def git(self, *args) -> str:
        return subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True, text=True).stdout

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", message)

    def run(self, *args: str, expect_ok: bool = True) -> str:
        proc = subprocess.run([sys.executable, *args], cwd=self.root, env=self.env, capture_output=True, text=True)
        output = proc.stdout + proc.stderr
        assert (proc.returncode == 0) == expect_ok, output[-4000:]
        return output

    def repro(self, *args: str, expect_ok: bool = True) -> tuple[set[str], str]:
        """Run `dvc repro`; return the stages that ran and the combined output."""
        output = self.run("-m", "dvc", "repro", *args, expect_ok=expect_ok)
        return ran_stages(output), output

    def dvc(self, *args: str) -> str:
        return self.run("-m", "dvc", *args)

    @property
    def params(self) -> dict:
        return yaml.safe_load((self.root / "params.yaml").read_text())

    def set_params(self, doc: dict) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    def add_aspects(self, **aspects: dict) -> None:
        doc = self.params
        doc["aspects"].update(aspects)
        self.set_params(doc)

    def catalog(self) -> dict:
        return json.loads((self.root / "artifacts" / "catalog.json").read_text())

    def lock(self) -> dict:
        return yaml.safe_load((self.root / "dvc.lock").read_text())["stages"]

    def file_hashes(self, cell: str) -> dict[str, str]:
        folder = self.root / paths.cell_dir(cell)
        return {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file()}


def light_checks(doc: dict, npu: tuple[str, ...] = ()) -> None:
    """The default GPU mode only, and NPU files only for the chips `npu` (none by default, each simulated): each
    mode and chip is one more run per cell and build, and each is tested once (test_gpu.py, test_npu.py and
    test_npu_delivery.py), not in each of the many builds the tests make."""
    doc["validation"]["gpu_modes"] = ["fp16"]
    doc["validation"]["gpu_mode_gates"] = {}
    doc["npu"]["targets"], doc["npu"]["simulate"] = list(npu), list(npu)  # two lists: YAML would alias one


def new_farm(root: Path, weights: torch.nn.Module, aspects: dict, tiers: tuple[int, ...] = (SMALL_TIER,),
             npu: tuple[str, ...] = ()) -> Farm:
    """The repository's files in `root`, a git repo whose params build `aspects` at `tiers` from `weights`
    (model MODEL: a Hub-layout checkpoint under checkpoints/, `source: local`), with NPU files for the chips `npu`."""
    for f in repo_files():
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, root / f)
    write_hub_layout(root / "checkpoints" / "stress", weights)
    farm = Farm(root)
    doc = farm.params
    doc["models"] = {MODEL: {**doc["models"]["small"], "source": "local", "path": "checkpoints/stress"}}
    doc["tiers"] = list(tiers)
    doc["aspects"] = dict(aspects)
    light_checks(doc, npu)
    farm.set_params(doc)
    farm.git("init", "-q")
    farm.commit("farm under test")
    return farm
