"""The bundle: small converted models merged into one file, a signature per aspect.

The expected figures are computed here from the single files alone (their buffers hashed with
hashlib), never with the merge code under test.
"""

from __future__ import annotations

import copy
import hashlib
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils

from da3_litert_farm.convert import tflite_bundle
from da3_litert_farm.core.aspects import Aspect, Shape
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.checks.bundle import check_sharing
from da3_litert_farm.convert.export import convert_to_tflite
from da3_litert_farm.checks.fidelity import TFLiteModel
from da3_litert_farm.model.mono_depth import MonoDepth
from da3_litert_farm.model.photo_input import cover_and_center_crop, load_photo, normalize
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.checks.shipped import Shipped
from da3_litert_farm.model.stress import stress_model
from tests.farm_repo import run_stage
from tests.conftest import SMALL
from tests.farm_repo import REPO

PORTRAIT = (SMALL[1], SMALL[0])  # 224 x 126


def convert(net, shape, out: Path) -> Path:
    mono = MonoDepth(copy.deepcopy(net), *shape).eval()
    fp32 = out.with_name(out.stem + "_fp32.tflite")
    convert_to_tflite(mono, *shape, fp32)
    quantize_fp16(fp32, out)
    return out


@pytest.fixture(scope="module")
def singles(module_dir, stress_net, small_tflite):
    """Three shipped files: landscape and portrait from one checkpoint, portrait from another."""
    out = module_dir("bundle")
    return {"land": small_tflite[1],
            "port": convert(stress_net, PORTRAIT, out / "port.tflite"),
            "other": convert(stress_model(seed=1), PORTRAIT, out / "other.tflite")}


def buffers(path: Path) -> dict[str, int]:
    """sha256 -> size of every non-empty buffer of a file, read with the schema bindings."""
    model = flatbuffer_utils.read_model(str(path))
    return {hashlib.sha256(bytes(b.data)).hexdigest(): len(b.data) for b in model.buffers
            if b.data is not None and len(b.data)}


def fp16_buffers(path: Path) -> dict[str, int]:
    model = flatbuffer_utils.read_model(str(path))
    data = [bytes(model.buffers[t.buffer].data) for g in model.subgraphs for t in g.tensors
            if t.type == schema.TensorType.FLOAT16]
    return {hashlib.sha256(d).hexdigest(): len(d) for d in data}


def photo(shape) -> np.ndarray:
    return normalize(cover_and_center_crop(load_photo("astronaut"), *shape))


def test_a_bundle_stores_shared_buffers_once_and_runs_each_signature_bitwise(singles, tmp_path):
    files = {"land": singles["land"], "port": singles["port"]}
    # Given in reverse name order: the bundle's signatures come in name order all the same.
    built = tflite_bundle.build_bundle({"port": files["port"], "land": files["land"]}, tmp_path)
    bundle = built.file
    assert bundle == tmp_path / "model_fp16.tflite"

    land, port = buffers(files["land"]), buffers(files["port"])
    # The same FP16 weights at both shapes, but for the position embedding's small per-shape matrices.
    weights_land, weights_port = fp16_buffers(files["land"]), fp16_buffers(files["port"])
    assert sum(weights_land.values()) > 40e6
    assert sum(n for h, n in weights_land.items() if h not in weights_port) < 2 * 2 * 37 * 16 * 2
    merged = buffers(bundle)
    assert set(merged) == set(land) | set(port)  # every buffer, each once
    # Size: the larger file plus the other's own buffers, plus the second subgraph's graph.
    own_port = sum(n for h, n in port.items() if h not in land)
    assert own_port < 1e6  # the position tables and the like; the weights (~48 MB) are shared
    assert files["land"].stat().st_size + own_port < bundle.stat().st_size \
        < files["land"].stat().st_size + own_port + 1e6
    assert built.own == {"land": sum(n for h, n in land.items() if h not in port), "port": own_port}
    assert {k: p.total for k, p in built.parts.items()} == {k: path.stat().st_size for k, path in files.items()}

    model = tflite_bundle.read(bundle)
    assert [s.signatureKey.decode() for s in model.signatureDefs] == ["land", "port"]
    for key, path in files.items():
        single = tflite_bundle.read(path)
        assert tflite_bundle.subgraph_structure(model, key) == tflite_bundle.subgraph_structure(single)
        image = photo(SMALL if key == "land" else PORTRAIT)
        ours, theirs = TFLiteModel(bundle, signature=key), TFLiteModel(path)
        assert ours.input_shape == theirs.input_shape == image.shape
        assert np.array_equal(ours(image), theirs(image))
    # The structures tell the two signatures apart (different shapes and tables).
    assert tflite_bundle.subgraph_structure(model, "land") != tflite_bundle.subgraph_structure(model, "port")


def test_three_signatures_share_what_two_share(singles, tmp_path):
    """A third aspect adds only its own bytes; here the same file again adds none but its graph."""
    two = tflite_bundle.merge({"land": singles["land"], "port": singles["port"]})
    three = tflite_bundle.merge({"land": singles["land"], "port": singles["port"], "port2": singles["port"]})
    assert 0 < len(three) - len(two) < 1e6
    path = tmp_path / "three.tflite"
    path.write_bytes(three)
    assert tflite_bundle.signature_keys(path) == ["land", "port", "port2"]


def shipped(name: str, path: Path, shape) -> Shipped:
    return Shipped(Cell("small", "da3-small", max(shape), Aspect(name, "x", Shape(*shape))), path, "", {}, {}, {})


def test_the_sharing_gate_refuses_aspects_built_from_different_checkpoints(singles, tmp_path):
    same = [shipped("land", singles["land"], SMALL), shipped("port", singles["port"], PORTRAIT)]
    other = [shipped("land", singles["land"], SMALL), shipped("other", singles["other"], PORTRAIT)]
    for group, expect_pass in ((same, True), (other, False)):
        files = {s.signature: s.file for s in group}
        data = tflite_bundle.merge(files)
        parts = {name: tflite_bundle.file_bytes(path) for name, path in files.items()}
        gate, failures = check_sharing(len(data), group, parts, tflite_bundle.own_bytes(files))
        assert gate["passed"] is expect_pass and gate["value"] == len(data)
        if expect_pass:
            assert failures == []
        else:
            (message,) = failures
            assert "their weights are not shared" in message and "same checkpoint" in message
            own = float(re.search(r"other adds (\d+\.\d) MB of its own", message)[1])
            assert own > 0.9 * singles["other"].stat().st_size / 1e6  # nearly its whole file
    # Nothing in common but the graph's small constants: the merge stored both files' weights.
    assert len(data) > 1.9 * singles["other"].stat().st_size


def test_merging_refuses_a_file_with_two_signatures(singles, tmp_path):
    double = tmp_path / "double.tflite"
    double.write_bytes(tflite_bundle.merge({"land": singles["land"], "port": singles["port"]}))
    with pytest.raises(tflite_bundle.BundleError, match="aspect twice: .* has 2 subgraphs and 2 signatures"):
        tflite_bundle.merge({"once": singles["land"], "twice": double})


def test_the_separable_position_embedding_keeps_per_shape_bytes_small(singles):
    """The backbone's position table is computed from the shared 37x37 grid: what differs between
    two shapes is a few small tables, not the interpolated table (1+N x 384 FP32)."""
    land, port = buffers(singles["land"]), buffers(singles["port"])
    own = sum(n for h, n in land.items() if h not in port)
    n_tokens = (SMALL[0] // 14) * (SMALL[1] // 14)
    assert own < (1 + n_tokens) * 384 * 4  # less than the baked table alone would be


def test_the_bundle_stage_refuses_unshared_weights_and_writes_nothing(singles, tmp_path, monkeypatch):
    """The stage itself, in a farm layout whose two aspects were built from different checkpoints."""
    from da3_litert_farm.core import fileio, paths

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["tiers"] = [max(SMALL)]
    params["aspects"] = {"land": {"height": SMALL[0], "width": SMALL[1]},
                         "other": {"height": PORTRAIT[0], "width": PORTRAIT[1]}}
    bundle = f"small-{max(SMALL)}"
    params["validation"]["gpu"] = "skip"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    for aspect, source in (("land", singles["land"]), ("other", singles["other"])):
        shape, name = SMALL if aspect == "land" else PORTRAIT, f"{bundle}-{aspect}"
        paths.cell_dir(name).mkdir(parents=True)
        shutil.copy(source, paths.fp16_model(name))
        sha = fileio.sha256_file(source)
        fileio.write_json(paths.metrics(name), {"passed": True, "height": shape[0], "width": shape[1], "sha256": sha})
        fileio.write_json(paths.lint_report(name), {"sha256": sha})
        fileio.write_json(paths.gpu_metrics(name), {"passed": True, "checked": False, "sha256": sha})
    proc = run_stage("bundle", bundle, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = proc.stderr
    assert f"bundle {bundle}: FAILED sharing: the bundle is" in err and "same checkpoint" in err
    assert not paths.bundle_dir(bundle).exists()
    left = [p for folder in (paths.ARTIFACTS, paths.BUNDLES) if folder.is_dir() for p in folder.iterdir()
            if p.name.startswith(".")]
    assert not left  # no temporary left behind


def test_load_cost_measures_the_loading_process_not_its_caller(small_tflite):
    """The caller holds 800 MiB; the load in its fresh process reports its own peak, not the caller's."""
    from da3_litert_farm.gpu import load_cost

    ballast = np.ones(800 * 2**20 // 8)
    cost = load_cost.measure(small_tflite[1], "cpu")
    assert ballast.sum() > 0 and cost["peak_rss_mib"] < 700
    assert cost["peak_growth_mib"] > small_tflite[1].stat().st_size / 2**20  # at least the file's weights
    assert cost["seconds"] > 0
