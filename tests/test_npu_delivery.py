"""NPU files from farm to app: a tiny stress farm compiled for two Qualcomm chips, published, then pulled per chip
(`farm pull --soc`), as a Play AI pack (`farm pull --ai-pack`) and shown (`farm show`), through the real client."""

from __future__ import annotations

import json
import sys

import pytest
from ai_edge_litert.aot.ai_pack import export_lib
from ai_edge_litert.aot.vendors.qualcomm import target as qualcomm

from da3_litert_farm.core import paths
from da3_litert_farm.core.fileio import sha256_file
from tests.fault_farm import copy_farm
from tests.test_publish_pull import ALLOW, farm_cli, run

CHIPS = ["SM8650", "SM8850"]  # HTP v75 and v81: each compiled; SM8650 also simulated
PULL = ("--version", "0.1.0", "--aspect", "9x16", "--allow-stress", "--allow-unsigned")


@pytest.fixture(scope="module")
def npu_farm(module_dir, fault_template):
    """The fault suite's tiny farm (3 aspects at tier 112) with NPU files for CHIPS, published as 0.1.0."""
    farm = copy_farm(fault_template, module_dir("npu-delivery"))
    doc = farm.params
    doc["npu"]["targets"], doc["npu"]["simulate"] = list(CHIPS), CHIPS[:1]
    farm.set_params(doc)
    ran, _ = farm.repro()
    assert {s for s in ran if s.startswith("npu@")} == {f"npu@small-112-{a}" for a in ("9x16", "3x4", "16x9")}
    farm.commit("NPU files for SM8650 and SM8850")
    out = run(sys.executable, "-m", "da3_litert_farm.ops.publish", *ALLOW, cwd=farm.root, env=farm.env)
    assert "as catalog/v0.1.0: 3 files, 6 NPU files and 1 bundle" in out
    return farm


def test_every_cell_is_compiled_for_each_chip_and_checked_on_the_simulator(npu_farm):
    """Each cell's shipped file compiled for CHIPS, all in one NPU partition, the simulated chip within the NPU gates
    of params.yaml against the official model, and catalogued with what was measured."""
    catalog, gates = npu_farm.catalog(), npu_farm.params["npu"]
    assert len(catalog["models"]) == 3
    for m in catalog["models"]:
        npu = m["npu"]
        assert npu["compiled"] and npu["qairt"].startswith("2.50.") and list(npu["targets"]) == CHIPS
        record = json.loads((npu_farm.root / paths.npu_record(m["cell"])).read_text())
        assert record["source_sha256"] == m["sha256"] == sha256_file(npu_farm.root / m["file"])  # compiled what ships
        for soc, target in npu["targets"].items():
            compiled = npu_farm.root / target["file"]
            assert compiled == npu_farm.root / paths.npu_model(m["cell"], soc)
            assert sha256_file(compiled) == target["sha256"] and target["bytes"] == compiled.stat().st_size
            assert target["partitions"] == 1 and target["ops_on_npu"] == target["ops_total"] >= m["gpu_lint"]["ops"]
            assert ("simulator" in target) == (soc in gates["simulate"])
        sim = npu["targets"]["SM8650"]["simulator"]
        assert (sim["gate_min_pearson"], sim["gate_max_mean_rel"]) == (gates["min_pearson"], gates["max_mean_rel"])
        assert sim["pearson_min"] >= gates["min_pearson"] and sim["mean_rel_max"] <= gates["max_mean_rel"]
        assert list(sim["photos"]) == npu_farm.params["validation"]["gpu_photos"]
        assert sim["vs_cpu"]["pearson_min"] > 0.9999  # the binary computes what the CPU file does, in FP16


def entry(farm, cell: str) -> dict:
    return next(m for m in farm.catalog()["models"] if m["cell"] == cell)


def test_pull_soc_gets_the_file_compiled_for_that_chip(npu_farm, tmp_path):
    cell = entry(npu_farm, "small-112-9x16")
    out = tmp_path / "assets"
    said = farm_cli("pull", "--repo", npu_farm.root, *PULL, "--soc", "SM8650", "--out", out, env=npu_farm.env,
                    cwd=tmp_path)
    assert "Qualcomm SM8650 (Snapdragon 8 Gen 3, HTP v75): the file compiled for its NPU" in said
    (model,) = out.glob("*.tflite")
    assert model.name == "da3-small-litert-small-112-9x16-112x70-qualcomm-sm8650.tflite"
    target = cell["npu"]["targets"]["SM8650"]
    assert sha256_file(model) == target["sha256"] == sha256_file(npu_farm.root / "artifacts/npu/small/112/9x16/SM8650.tflite")
    side = json.loads(model.with_name(f"{model.name}.json").read_text())
    assert side["accelerator"] == "npu" and side["sha256"] == target["sha256"] and side["bytes"] == target["bytes"]
    npu = side["npu"]
    assert (npu["soc"], npu["htp_arch"], npu["qairt"]) == ("SM8650", "v75", cell["npu"]["qairt"])
    assert "QNN runtime libraries of QAIRT 2.50" in npu["runtime"] and "libQnnHtpV75Skel.so" in npu["runtime"]
    assert npu["fallback"] == {"file": "da3-small-litert-small-112-9x16-112x70-fp16.tflite", "sha256": cell["sha256"],
                               "why": npu["fallback"]["why"]}
    assert npu["simulator"]["pearson_min"] == target["simulator"]["pearson_min"] >= npu_farm.params["npu"]["min_pearson"]


@pytest.mark.parametrize("soc", ["SM8750", "QCS9999"])  # a chip the farm could compile for but did not; an unknown one
def test_a_chip_without_a_file_gets_the_gpu_file_and_says_why(npu_farm, tmp_path, soc):
    out = tmp_path / "assets"
    said = farm_cli("pull", "--repo", npu_farm.root, *PULL, "--soc", soc, "--out", out, env=npu_farm.env, cwd=tmp_path)
    assert (f"no NPU file for {soc} in cell small-112-9x16 (compiled for: SM8650, SM8850): the GPU file, which runs "
            "on any phone's GPU") in said
    (model,) = out.glob("*.tflite")
    assert model.name == "da3-small-litert-small-112-9x16-112x70-fp16.tflite"
    assert sha256_file(model) == entry(npu_farm, "small-112-9x16")["sha256"]
    assert json.loads(model.with_name(f"{model.name}.json").read_text())["accelerator"] == "gpu"


def test_select_and_show_name_the_npu_files(npu_farm, tmp_path):
    said = farm_cli("select", "--repo", npu_farm.root, "--version", "0.1.0", "--camera", "1080x1920", "--soc", "sm8850",
                    env=npu_farm.env, cwd=tmp_path)
    assert "small-112-9x16: artifacts/npu/small/112/9x16/SM8850.tflite sha256 " in said
    shown = farm_cli("show", "--repo", npu_farm.root, "--version", "0.1.0", env=npu_farm.env, cwd=tmp_path)
    assert shown.count("NPU SM8650 (HTP v75): ") == 3 and shown.count("NPU SM8850 (HTP v81): ") == 3
    assert shown.count("not simulated") == 3  # SM8850's files: only npu.simulate's chips run on the simulator


def test_ai_pack_targets_every_compiled_chip_as_litert_would(npu_farm, tmp_path):
    cell = entry(npu_farm, "small-112-9x16")
    out = tmp_path / "ai_packs" / "depth"
    said = farm_cli("pull", "--repo", npu_farm.root, *PULL, "--ai-pack", "--out", out, env=npu_farm.env, cwd=tmp_path)
    pack = "da3_small_litert_small_112_9x16"
    assert f"AI pack {pack} in {out}: SM8650, SM8850 on their NPUs, every other device the GPU file" in said
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assets = f"{pack}/src/main/assets"
    assert files == sorted(["ai-pack.json", "device_targeting_configuration.xml", f"{pack}/build.gradle.kts",
                            f"{assets}/model#group_Qualcomm_SM8650/depth.tflite",
                            f"{assets}/model#group_Qualcomm_SM8850/depth.tflite",
                            f"{assets}/model#group_other/depth.tflite"])
    for soc in CHIPS:
        assert sha256_file(out / assets / f"model#group_Qualcomm_{soc}/depth.tflite") == \
            cell["npu"]["targets"][soc]["sha256"]
    assert sha256_file(out / assets / "model#group_other/depth.tflite") == cell["sha256"]
    # The targeting file as LiteRT's own AI pack export writes it for the same Qualcomm targets.
    groups = "\n".join(export_lib._target_to_ai_pack_info(qualcomm.Target(qualcomm.SocModel(soc))) for soc in CHIPS)
    litert = export_lib._DEVICE_TARGETING_CONFIGURATION.format(device_groups=groups)
    assert (out / "device_targeting_configuration.xml").read_text() == litert
    described = json.loads((out / "ai-pack.json").read_text())["groups"]
    assert described[f"{assets}/model#group_Qualcomm_SM8850/depth.tflite"]["npu"]["htp_arch"] == "v81"
    assert described[f"{assets}/model#group_other/depth.tflite"]["accelerator"] == "gpu"


def test_soc_with_a_bundle_is_refused(npu_farm, tmp_path):
    """The bundle stays the GPU's: --soc with --bundle is refused before anything is read."""
    said = farm_cli("pull", "--repo", npu_farm.root, "--version", "0.1.0", "--bundle", "--soc", "SM8650",
                    "--allow-stress", "--allow-unsigned", "--out", tmp_path / "x", env=npu_farm.env, cwd=tmp_path,
                    ok=False)
    assert "--soc picks one cell's file compiled for that chip's NPU; a bundle is for the GPU" in said
    assert not (tmp_path / "x").exists()
