import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from da3_litert_farm.core import paths
from da3_litert_farm.core.models import PRESETS, output_entry
from da3_litert_farm.config.params import ParamsError, load_params, load_schema, parse_params
from da3_litert_farm.ops.catalog import validate_catalog
from tests.farm_repo import run_stage

REPO = Path(__file__).resolve().parents[1]
VALID = {
    "models": {"small": {"source": "random", "preset": "da3-small", "repo": "depth-anything/DA3-SMALL",
                         "revision": "main", "path": None, "seed": 0, "outliers": False}},
    "tiers": [896],
    "max_tensor_mib": 128,
    "aspects": {"9x16": {"ratio": "9:16"}, "3x4": {"ratio": "3:4"}},
    "validation": {"min_pearson": 0.99999, "max_mean_rel": 0.003, "gpu": "required", "gpu_min_pearson": 0.998,
                   "gpu_max_mean_rel": 0.03, "photos": ["motorcycle_left", "astronaut", "coffee"],
                   "gpu_photos": ["coffee"], "gpu_modes": ["fp16"], "gpu_mode_gates": {}},
    "npu": {"targets": ["SM8650"], "simulate": ["SM8650"], "min_pearson": 0.999, "max_mean_rel": 0.01},
    "catalog": {"name": "da3-small-litert", "version": "0.1.0"},
}


def edited(**changes):
    doc = copy.deepcopy(VALID)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = doc
        for p in parents:
            node = node[p]
        if value is DELETE:
            del node[leaf]
        else:
            node[leaf] = value
    return doc


DELETE = object()


def test_repository_params_are_valid():
    params = load_params(REPO / "params.yaml")
    assert {c: (x.height, x.width) for c, x in params.cells.items()} == {
        "small-896-9x16": (896, 504), "small-896-3x4": (896, 672), "small-896-4x3": (672, 896),
        "small-896-16x9": (504, 896)}
    assert params.models["small"].source == "hub" and params.models["small"].preset == "da3-small"
    assert params.validation.min_pearson == 0.99999
    assert params.validation.gpu == "required" and params.max_tensor_mib == 128


def test_a_square_896_aspect_fits_by_chunking_attention():
    from da3_litert_farm.core.tensor_plan import MIB, plan_tensors

    params = parse_params(edited(aspects__square={"ratio": "1:1"}))
    square = params.cell("small-896-square")
    plan = plan_tensors(params.preset("small"), square.height, square.width, params.max_tensor_mib * MIB)
    assert (square.height, square.width, plan.tokens, plan.query_chunk) == (896, 896, 4097, 2049)
    assert plan.largest_bytes <= 128 * MIB < plan_tensors(params.preset("small"), 896, 896, 1 << 40).largest_bytes


def test_valid_document():
    params = parse_params(VALID)
    assert params.cell("small-896-3x4").shape.width == 672
    assert params.validation.photos == ("motorcycle_left", "astronaut", "coffee")
    assert params.validation.gpu_photos == ("coffee",) and params.validation.gpu_modes == ("fp16",)
    assert params.validation.gpu_mode_gates == ()


def test_gpu_photos_are_a_chosen_subset_of_the_photos():
    params = parse_params(edited(validation__photos=["astronaut", "coffee", "rocket"], validation__gpu_photos=["rocket"]))
    assert params.validation.photos == ("astronaut", "coffee", "rocket")
    assert params.validation.gpu_photos == ("rocket",)


def test_a_gpu_mode_has_its_own_gates_where_set_and_the_gpu_gates_elsewhere():
    params = parse_params(edited(validation__gpu_modes=["fp16", "fp16_fp32_accum"], validation__gpu_mode_gates={
        "fp16_fp32_accum": {"min_pearson": 0.9991, "max_mean_rel": 0.021}}))
    assert params.validation.gpu_gates("fp16_fp32_accum") == (
        0.9991, 0.021, ("validation.gpu_mode_gates.fp16_fp32_accum.min_pearson",
                        "validation.gpu_mode_gates.fp16_fp32_accum.max_mean_rel"))
    assert params.validation.gpu_gates("fp16") == (0.998, 0.03, ("validation.gpu_min_pearson",
                                                                 "validation.gpu_max_mean_rel"))


@pytest.mark.parametrize(
    "doc, message",
    [
        (edited(models__small__sourse="hub"), "models.small: unknown key(s) ['sourse']"),
        (edited(aspects__4x3={"ratio": "4:0"}), "aspects.4x3.ratio: '4:0' is not a ratio"),
        (edited(aspects__4x3={"ratio": "4:3", "long_side": 1000}), "aspects.4x3: unknown key(s) ['long_side']"),
        (edited(aspects__square={"height": 896, "width": 504}),
         "aspects.square and aspects.9x16 both give 896x504 (HxW) at tier 896"),
        (edited(tiers=[896, 518], aspects__square={"height": 896, "width": 896}),
         "aspects.square: height and width fix one shape (896x896), which tiers [896, 518] would each build"),
        (edited(aspects__square={"height": 518, "width": 518}),
         "aspects.square: height and width fix one shape (518x518), which tiers [896] would each build: give it a "
         "ratio, or set tiers: [518] alone"),
        (edited(tiers=[896, 896]), "tiers: [896, 896] must be a list of distinct long sides"),
        (edited(tiers=[]), "tiers: [] must be a list of distinct long sides"),
        (edited(models={}), "models: {} must be a mapping of at least one model name"),
        (edited(models__Big={"source": "random"}), "models: key 'Big' must be a model name: lowercase letters"),
        (edited(**{"models__small-2": {"source": "random"}}), "models: key 'small-2' must be a model name"),
        (edited(models__large={"source": "random", "preset": "da3metric-large"}),
         "aspects.3x4 at tier 896 for models.large (da3metric-large): 896x672 needs a head features tensor of 148 MiB"),
        (edited(aspects={}), "aspects: {} must be a mapping of at least one aspect name to its entry"),
        (edited(models__small__source="s3"), "models.small.source: 's3' is not one of ['hub', 'local', 'random']"),
        (edited(models__small__source="local"), "models.small.path: source 'local' needs a directory"),
        (edited(models__small__source="local", models__small__path="/nonexistent"), "lacks ['config.json', 'model.safetensors']"),
        (edited(models__small__source="hub", models__small__repo="DA3-SMALL"), "models.small.repo: 'DA3-SMALL' must be a Hub repo id like 'depth-anything/DA3-SMALL'"),
        (edited(models__small__seed=-1), "models.small.seed"),
        (edited(models__small__outliers="yes"), "models.small.outliers: 'yes' must be true or false"),
        (edited(models__small__source="hub", models__small__outliers=True),
         "models.small.outliers: true plants outliers in stress weights; it needs source: random, not 'hub'"),
        (edited(tiers=[896, 1000]), "tiers[1]: 1000 is not a multiple of 14"),
        (edited(tiers=DELETE), "top level: missing key(s) ['tiers']"),
        (edited(models=DELETE), "top level: missing key(s) ['models']"),
        (edited(validation__min_pearson=1.5), "validation.min_pearson: 1.5 must be a number in (0, 1]"),
        (edited(validation__photos=["astronaut"]), "validation.photos: ['astronaut'] must be a list of at least 3 "
                                                    "distinct photos from ['motorcycle_left', 'astronaut', 'coffee', "
                                                    "'rocket', 'chelsea']"),
        (edited(validation__photos=["astronaut", "coffee", "lena"]),
         "validation.photos[2]: 'lena' is not one of ['motorcycle_left', 'astronaut', 'coffee', 'rocket', 'chelsea']"),
        (edited(validation__photos=["astronaut", "coffee", "coffee"]),
         "validation.photos: ['astronaut', 'coffee', 'coffee'] must be a list of at least 3 distinct photos"),
        (edited(catalog__version=0.1), 'catalog.version: 0.1 must be a semantic version like "0.1.0" (quote it in YAML)'),
        (edited(catalog__version="1.0"), "catalog.version: '1.0' must be a semantic version"),
        (edited(validation__gpu="maybe"), "validation.gpu: 'maybe' is not one of ['required', 'skip']"),
        (edited(validation__photos=["astronaut", "coffee", "rocket"], validation__gpu_photos=["coffee", "chelsea"]),
         "validation.gpu_photos: ['chelsea'] not in validation.photos ['astronaut', 'coffee', 'rocket']"),
        (edited(validation__gpu_photos=[]), "validation.gpu_photos: [] must be a list of at least 1 distinct photo"),
        (edited(validation__gpu_photos=["coffee", "coffee"]), "validation.gpu_photos: ['coffee', 'coffee'] must be"),
        (edited(validation__gpu_photos=["lena"]), "validation.gpu_photos[0]: 'lena' is not one of"),
        (edited(validation__gpu=DELETE), "validation: missing key(s) ['gpu']"),
        # DVC tracks it (gpu@CELL's params) and would stop at the first GPU stage, after every conversion.
        (edited(validation__gpu_mode_gates=DELETE), "validation: missing key(s) ['gpu_mode_gates']"),
        (edited(validation__max_mean_rel=0), "validation.max_mean_rel: 0 must be a number in (0, 1]"),
        (edited(validation__gpu_min_pearson="high"), "validation.gpu_min_pearson: 'high' must be a number"),
        (edited(max_tensor_mib=0.5), "max_tensor_mib: 0.5 must be an integer in [16, 4096]"),
        # 2016x2016: attention chunks fit, but the head's full-resolution features do not.
        (edited(tiers=[2016], aspects={"big": {"height": 2016, "width": 2016}}),
         "aspects.big at tier 2016 for models.small (da3-small): 2016x2016 needs a head features tensor of 249 MiB "
         "in FP16, over max_tensor_mib 128"),
        (edited(max_tensor_mib=32), "aspects.3x4 at tier 896 for models.small (da3-small): 896x672 needs a head "
                                    "features tensor of 37 MiB"),
        (edited(catalog__name="DA3 Small"), "catalog.name: 'DA3 Small' must be lowercase letters, digits"),
        # Caught by the schema, once only the planner checked them:
        (edited(extra=1), "top level: unknown key(s) ['extra']; allowed: ['models', 'tiers', "
                          "'max_tensor_mib', 'aspects', 'validation', 'npu', 'catalog']"),
        (None, "top level: None must be a mapping with keys ['models', 'tiers'"),
        (edited(models__small=["hub"]), "models.small: ['hub'] must be a mapping with keys ['source', 'preset', "
                                        "'repo', 'revision', 'path', 'seed', 'outliers']"),
        (edited(validation__gpu_modes=["fp16_fp32_accum"]),
         "validation.gpu_modes: ['fp16_fp32_accum'] must be a list of GPU modes from ['fp16', 'fp16_fp32_accum'] that "
         "holds 'fp16' (the runtime's default"),
        (edited(validation__gpu_modes=["fp16", "fp32"]), "validation.gpu_modes[1]: 'fp32' is not one of ['fp16', "
                                                         "'fp16_fp32_accum']"),
        (edited(validation__gpu_mode_gates={"fp16_fp32_accum": {"min_pearson": 0.999, "max_mean_rel": 0.02}}),
         "validation.gpu_mode_gates: ['fp16_fp32_accum'] not in validation.gpu_modes ['fp16']: gates of a mode the "
         "GPU check does not run would never apply"),
        (edited(validation__gpu_modes=["fp16"], validation__gpu_mode_gates={"fp16": {"min_pearson": 0.999,
                                                                                     "max_mean_rel": 0.02}}),
         "validation.gpu_mode_gates: 'fp16' is gated by validation.gpu_min_pearson and validation.gpu_max_mean_rel"),
        (edited(validation__gpu_modes=["fp16", "fp16_fp32_accum"],
                validation__gpu_mode_gates={"fp16_fp32_accum": {"min_pearson": 0.999}}),
         "validation.gpu_mode_gates.fp16_fp32_accum: missing key(s) ['max_mean_rel']"),
        (edited(validation__gpu_modes=["fp16", "fp16_fp32_accum"],
                validation__gpu_mode_gates={"fp16_fp32_accum": {"min_pearson": 1.5, "max_mean_rel": 0.02}}),
         "validation.gpu_mode_gates.fp16_fp32_accum.min_pearson: 1.5 must be a number in (0, 1]"),
        (edited(models__small__source="hub", models__small__revision=""),
         "models.small.revision: '' must be a branch, tag or commit hash"),
        (edited(tiers=[896.0]), "tiers[0]: 896.0 must be an integer number of pixels, a multiple of 14 (the ViT "
                                "patch size) in [56, 2016]"),
        (edited(validation__min_pearson=float("nan")), "validation.min_pearson: nan must be a number in (0, 1]"),
        (edited(validation__photos="astronaut"), "validation.photos: 'astronaut' must be a list of at least 3"),
        (edited(aspects__a={"height": 900, "width": 504}), "aspects.a.height: 900 is not a multiple of 14"),
        (edited(aspects__a={"height": 896, "width": 500}), "aspects.a.width: 500 is not a multiple of 14"),
        (edited(aspects__a={"height": 42, "width": 504}), "aspects.a.height: 42 must be an integer number of pixels, "
                                                          "a multiple of 14 (the ViT patch size) in [56, 2016]"),
        (edited(aspects__a={"height": 2030, "width": 504}), "aspects.a.height: 2030 must be an integer"),
        (edited(aspects__a={"ratio": "9:16", "rotation": 90}),
         "aspects.a: unknown key(s) ['rotation']; allowed: ['ratio', 'height', 'width']"),
        (edited(aspects__a="9:16"), "aspects.a: '9:16' must be a mapping like {ratio: \"9:16\"} or "
                                    "{height: 896, width: 504}"),
        # The catalog's pattern for a ratio: refused here, not after a whole build.
        (edited(aspects__a={"ratio": " 9:16"}), "aspects.a.ratio: ' 9:16' must be a ratio of two positive numbers"),
    ],
)
def test_errors_name_the_key_and_what_is_allowed(doc, message):
    with pytest.raises(ParamsError) as err:
        parse_params(doc)
    assert message in str(err.value)


@pytest.mark.parametrize("name", ["9 x 16", "a..b", "tall.", "x.lock", "bundle"])  # invalid in a git tag; the bundle's
def test_bad_aspect_name(name):
    with pytest.raises(ParamsError, match=rf"^aspects: key '{re.escape(name)}' must be an aspect name: letters, digits"):
        parse_params(edited(**{f"aspects__{name}": {"ratio": "1:1"}}))


def test_aspect_names_may_have_dots_and_yaml_numbers_become_names():
    params = parse_params(edited(aspects={"v1.2": {"ratio": "1:1"}, 169: {"ratio": "16:9"}}))
    assert {c: (x.height, x.width) for c, x in params.cells.items()} == {"small-896-v1.2": (896, 896),
                                                                        "small-896-169": (504, 896)}


def test_the_matrix_is_every_model_at_every_tier_over_every_aspect():
    """Two models at two tiers over two aspects: eight cells, each aspect planned at its tier, models outermost;
    a bundle per model and tier, a signature per aspect."""
    params = parse_params(edited(models__base={"source": "random", "preset": "da3-base"}, tiers=[896, 518]))
    shapes = {c: (x.preset, x.height, x.width) for c, x in params.cells.items()}
    assert shapes == {
        "small-896-9x16": ("da3-small", 896, 504), "small-896-3x4": ("da3-small", 896, 672),
        "small-518-9x16": ("da3-small", 518, 294), "small-518-3x4": ("da3-small", 518, 392),  # 291.4, 388.5 round
        "base-896-9x16": ("da3-base", 896, 504), "base-896-3x4": ("da3-base", 896, 672),
        "base-518-9x16": ("da3-base", 518, 294), "base-518-3x4": ("da3-base", 518, 392)}
    assert {b: [c.aspect.name for c in cells] for b, cells in params.bundles().items()} == {
        "small-896": ["9x16", "3x4"], "small-518": ["9x16", "3x4"], "base-896": ["9x16", "3x4"],
        "base-518": ["9x16", "3x4"]}
    with pytest.raises(ParamsError, match=r"cell 'small-224-9x16' is not in params.yaml's matrix"):
        params.cell("small-224-9x16")
    with pytest.raises(ParamsError, match=r"bundle 'tiny-896' is not in params.yaml's matrix \(MODEL-TIER\); "
                                          r"configured: \['small-896', 'small-518', 'base-896', 'base-518'\]"):
        params.bundle("tiny-896")


def test_local_path_is_relative_to_the_params_file(tmp_path):
    ckpt = tmp_path / "checkpoints" / "mine"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text("{}")
    doc = edited(models__small__source="local", models__small__path="checkpoints/mine")
    with pytest.raises(ParamsError, match=r"lacks \['model.safetensors'\]"):
        parse_params(doc, base_dir=tmp_path)
    (ckpt / "model.safetensors").write_bytes(b"")
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(doc))
    assert load_params(params_file).models["small"].path == "checkpoints/mine"


def test_unknown_cell_and_model_lookup():
    with pytest.raises(ParamsError, match=r"cell 'small-896-4x3' is not in params.yaml's matrix \(MODEL-TIER-ASPECT\); "
                                          r"configured: \['small-896-9x16', 'small-896-3x4'\]"):
        parse_params(VALID).cell("small-896-4x3")
    with pytest.raises(ParamsError, match=r"model 'base' is not in params.yaml; configured: \['small'\]"):
        parse_params(VALID).model("base")


def test_yaml_errors_are_reported(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("aspects: {9x16: [\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(bad)


def test_the_params_stage_writes_each_aspect_checked_and_refuses_a_bad_file_without_touching_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    doc = copy.deepcopy(VALID)
    Path("params.yaml").write_text(yaml.safe_dump(doc))
    assert run_stage("params", "--write", cwd=tmp_path).returncode == 0
    written = {p.relative_to(paths.CHECKED_PARAMS).as_posix(): json.loads(p.read_text())
               for p in paths.CHECKED_PARAMS.rglob("*.json")}
    assert set(written) == {"models/small.json", "cells/small-896-9x16.json", "cells/small-896-3x4.json"}
    assert written["models/small.json"] == doc["models"]["small"]
    assert written["cells/small-896-3x4.json"] == {"cell": "small-896-3x4", "model": "small", "preset": "da3-small",
                                                   "tier": 896, "aspect": "3x4", "ratio": "3:4", "height": 896,
                                                   "width": 672, "max_tensor_mib": 128}
    before = {p: p.read_bytes() for p in paths.CHECKED_PARAMS.rglob("*.json")}
    doc["tiers"] = [900]
    Path("params.yaml").write_text(yaml.safe_dump(doc))
    refused = run_stage("params", "--write", cwd=tmp_path)
    assert refused.returncode == 1 and "tiers[0]: 900 is not a multiple of 14" in refused.stderr
    assert {p: p.read_bytes() for p in paths.CHECKED_PARAMS.rglob("*.json")} == before


def test_per_cell_stages_do_not_need_the_local_checkpoint_files(tmp_path):
    """They read artifacts/checkpoints/MODEL; a parallel build's worker has that and not checkpoints/."""
    doc = edited(models__small__source="local", models__small__path="checkpoints/gone")
    with pytest.raises(ParamsError, match="models.small.path: 'checkpoints/gone' lacks"):
        parse_params(doc, base_dir=tmp_path)
    assert parse_params(doc, base_dir=tmp_path, checkpoint_files=False).models["small"].path == "checkpoints/gone"


def minimal_catalog() -> dict:
    """The least catalog.json the catalog schema takes: one model, its GPU check skipped."""
    photos = {"motorcycle_left": 0.999, "astronaut": 0.999, "coffee": 0.999}
    model = {
        "cell": "small-896-9x16", "model": "small", "tier": 896, "aspect": "9x16", "ratio": "9:16", "height": 896,
        "width": 504, "file": "artifacts/models/small/896/9x16/model_fp16.tflite",
        "sha256": "0" * 64, "bytes": 1, "precision": "fp16-weights",
        "input": {"shape": [1, 3, 896, 504], "layout": "NCHW", "dtype": "float32",
                  "preprocessing": {"resize": "cover", "crop": "center", "scale": 1 / 255, "mean": [0.5] * 3,
                                    "std": [0.25] * 3, "channel_order": "RGB"}},
        "output": {"shape": [1, 1, 896, 504], "layout": "NCHW", "dtype": "float32", **output_entry(PRESETS["da3-small"])},
        "fidelity": {"reference": "official", "gate_min_pearson": 0.99999, "gate_max_mean_rel": 0.003,
                     "pearson_min": 0.9999, "cosine_min": 0.9999, "max_abs_error": 0.01, "mean_rel_error_max": 0.001,
                     "photos": photos},
        "gpu_lint": {"gpu_clean": True, "ops": 1, "max_rank": 4, "op_histogram": {"CONV_2D": 1},
                     "fp16_weight_tensors": 1, "largest_tensor_bytes": 1},
        "gpu": {"checked": False, "reason": "validation.gpu: skip"},
        "npu": {"compiled": False, "reason": "npu.targets is empty in params.yaml"},
    }
    return {
        "schema_version": 2, "name": "da3-small-litert", "version": "0.1.0", "created": "2026-01-01T00:00:00Z",
        "sources": {"small": {
            "checkpoint": {"source": "random", "repo": None, "revision": None, "resolved_revision": None, "path": None,
                           "seed": 0, "model_name": "da3-small", "weights_sha256": "0" * 64},
            "license": {"code": "Apache-2.0", "weights": "none: stress weights", "weights_source": "random, seed 0",
                        "attribution": None, "commercial_use": "unknown", "license_source": None}}},
        "tools": {t: "1.0" for t in ("torch", "litert-torch", "ai-edge-litert", "ai-edge-quantizer",
                                     "depth-anything-3", "dvc")},
        "models": [model],
    }


@pytest.mark.parametrize(
    "params_change, catalog_key, value, params_message, catalog_message",
    [
        ({"catalog__version": "1.0"}, ("version",), "1.0", "catalog.version: '1.0'", "'1.0' does not match"),
        ({"catalog__name": "DA3"}, ("name",), "DA3", "catalog.name: 'DA3'", "'DA3' does not match"),
        ({"models__Small": {"source": "random"}}, ("models", 0, "model"), "Small", "key 'Small'",
         "'Small' does not match"),
        ({"tiers": [900]}, ("models", 0, "tier"), 900, "tiers[0]: 900 is not a multiple of 14",
         "900 is not a multiple of 14"),
        ({"aspects__9x16": {"height": 900, "width": 504}}, ("models", 0, "height"), 900,
         "aspects.9x16.height: 900 is not a multiple of 14", "900 is not a multiple of 14"),
        ({"aspects__9x16": {"ratio": " 9:16"}}, ("models", 0, "ratio"), " 9:16",
         "aspects.9x16.ratio: ' 9:16'", "' 9:16' does not match"),
        ({"aspects__a..b": {"ratio": "1:1"}}, ("models", 0, "aspect"), "a..b", "key 'a..b'", "'a..b' does not match"),
        ({"aspects__bundle": {"ratio": "1:1"}}, ("models", 0, "aspect"), "bundle", "key 'bundle'",
         "'bundle' should not be valid"),
        ({"validation__min_pearson": 1.5}, ("models", 0, "fidelity", "gate_min_pearson"), 1.5,
         "validation.min_pearson: 1.5", "1.5 is greater than the maximum of 1"),
        ({"validation__photos": ["astronaut", "coffee", "lena"]}, ("models", 0, "fidelity", "photos"),
         {"astronaut": 0.999, "coffee": 0.999, "lena": 0.999}, "'lena' is not one of", "'lena' is not one of"),
    ],
)
def test_params_and_the_catalog_refuse_alike(params_change, catalog_key, value, params_message, catalog_message):
    """What params.yaml sets, the catalog schema checks with the same definitions."""
    validate_catalog(minimal_catalog())
    with pytest.raises(ParamsError, match=re.escape(params_message)):
        parse_params(edited(**params_change))
    doc = minimal_catalog()
    *parents, leaf = catalog_key
    node = doc
    for key in parents:
        node = node[key]
    node[leaf] = value
    with pytest.raises(jsonschema.ValidationError, match=re.escape(catalog_message)):
        validate_catalog(doc)


def test_both_schemas_resolve_one_semver_definition():
    doc = minimal_catalog()
    doc["version"] = "0.1.0-rc.1"
    validate_catalog(doc)
    assert parse_params(edited(catalog__version="0.1.0-rc.1")).catalog.version == "0.1.0-rc.1"
    doc["version"] = "0.1"
    with pytest.raises(jsonschema.ValidationError) as refused:
        validate_catalog(doc)
    assert refused.value.validator == "pattern"
    assert refused.value.schema is load_schema()["$defs"]["semver"]  # the very object params.yaml is checked with


# --- params.yaml agrees with the schema: its keys, the keys its comments name, the values its comments list ---

COMMENTED_KEY = re.compile(r"^( *)# ([a-z_]+): \S.*#")  # a key written out but commented: `# repo: X  # why`
LISTED = re.compile(r"#[^#]*?([\w-]+(?: \| [\w-]+)+)")  # a comment listing what a key takes: `# hub | local | random`


def key_lines(text: str) -> dict[int, tuple[int, tuple[str, ...]]]:
    """Each line of a YAML mapping key: (its column, its path of keys)."""
    found = {}

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                found[key.start_mark.line] = (key.start_mark.column, (*path, key.value))
                walk(value, (*path, key.value))

    walk(yaml.compose(text), ())
    return found


def named_keys(text: str) -> list[tuple[str, ...]]:
    """The keys a params.yaml names: its own, and those its comments write out, placed beside their siblings."""
    keys = key_lines(text)
    named = [path for _, path in keys.values()]
    for number, line in enumerate(text.splitlines()):
        if match := COMMENTED_KEY.match(line):
            column = len(match.group(1))
            sibling = min((n for n, (c, _) in keys.items() if c == column), key=lambda n: abs(n - number))
            named.append((*keys[sibling][1][:-1], match.group(2)))
    return named


def schema_at(path: tuple[str, ...]) -> dict | None:
    """The schema of the key at `path` in params.schema.json (its $refs followed), or None where it has none."""
    from da3_litert_farm.config.params import _registry

    resolver = _registry().resolver(base_uri=load_schema()["$id"])
    node = load_schema()
    for key in (*path, None):
        while "$ref" in node:
            resolved = resolver.lookup(node["$ref"])
            node, resolver = resolved.contents, resolved.resolver
        if key is None:
            return node
        if key in node.get("properties", {}):
            node = node["properties"][key]
        elif isinstance(node.get("additionalProperties"), dict):  # a mapping of names (models, aspects)
            node = node["additionalProperties"]
        else:
            return None


def disagreements(text: str) -> list[str]:
    """Where params.yaml's keys or comments say what the schema does not."""
    found = [f"{'.'.join(path)}: not in the schema" for path in named_keys(text) if schema_at(path) is None]
    lines = text.splitlines()
    for number, (_, path) in key_lines(text).items():
        if (listed := LISTED.search(lines[number])) and (schema := schema_at(path)) is not None:
            values = listed.group(1).split(" | ")
            if values != schema.get("enum"):
                found.append(f"{'.'.join(path)}: the comment lists {values}, the schema {schema.get('enum')}")
    return found


def test_params_yaml_names_only_keys_and_values_the_schema_has():
    text = (REPO / "params.yaml").read_text()
    assert ("models", "small", "repo") in named_keys(text)  # the commented-out key is read, beside its siblings
    assert len(LISTED.findall(text)) >= 2  # the source and preset lists are checked
    assert disagreements(text) == []


def test_a_key_or_a_value_the_schema_lacks_is_reported():
    text = (REPO / "params.yaml").read_text()
    planted = (text.replace("# repo: OWNER/NAME", "# repos: OWNER/NAME")
               .replace("# hub | local | random", "# hub | local | random | s3")
               .replace("  max_mean_rel:", "  max_mean_relative:", 1))  # validation's, the first
    assert disagreements(planted) == [
        "validation.max_mean_relative: not in the schema",
        "models.small.repos: not in the schema",
        "models.small.source: the comment lists ['hub', 'local', 'random', 's3'], the schema ['hub', 'local', "
        "'random']"]


@pytest.mark.parametrize("preset, repo", [("da3-base", "depth-anything/DA3-BASE"),
                                          ("da3-small", "depth-anything/DA3-SMALL")])
def test_switching_the_preset_alone_takes_the_presets_own_repo(tmp_path, preset, repo):
    text = (REPO / "params.yaml").read_text()
    assert text.count("preset: da3-small ") == 1
    (tmp_path / "params.yaml").write_text(text.replace("preset: da3-small ", f"preset: {preset} "))
    params = load_params(tmp_path / "params.yaml")
    assert (params.models["small"].preset, params.models["small"].repo) == (preset, repo)
