"""dvc.yaml names exactly the code each stage runs and the paths da3_litert_farm.core.paths defines."""

import ast
import dataclasses
import json
import modulefinder
from pathlib import Path

import pytest
import yaml

from da3_litert_farm.config import params as params_module
from da3_litert_farm.config.params import ValidationParams
from da3_litert_farm.core import paths
from da3_litert_farm.core.pipeline import PER_CELL_STAGES, STAGES
from da3_litert_farm.dev import dvc_yaml
from da3_litert_farm.ops import catalog as catalog_module

REPO = Path(__file__).resolve().parents[1]
CODE = ("da3_litert_farm/", "stages/")


def dvc_stages():
    doc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    return {name: (stage["do"] if "foreach" in stage else stage) for name, stage in doc["stages"].items()}


def test_the_committed_dvc_yaml_is_the_generated_one():
    committed = (REPO / "dvc.yaml").read_text()
    assert committed == dvc_yaml.generate(committed), "dvc.yaml's code deps are stale: run `make dvc-yaml`"


def _python_imports(stage: str) -> set[str]:
    """The repository's modules stages/<stage>.py loads, found by the standard library's modulefinder
    (it reads the bytecode, function bodies included): a derivation independent of the generator's."""
    finder = modulefinder.ModuleFinder(path=[str(REPO)])  # this repository only: libraries are not followed
    finder.run_script(str(REPO / "stages" / f"{stage}.py"))
    files = {Path(m.__file__) for m in finder.modules.values() if m.__file__}
    return {f.relative_to(REPO).as_posix() for f in files if f.name != "__init__.py"}


def test_every_stage_depends_on_exactly_the_code_it_runs():
    schema_of = {"da3_litert_farm/config/params.py": params_module.SCHEMA_FILE,
                 "da3_litert_farm/ops/catalog.py": catalog_module.SCHEMA_FILE}
    for name, stage in dvc_stages().items():
        code_deps = {d for d in stage["deps"] if d.startswith(CODE)}
        modules = _python_imports(name)
        data = {Path(schema_of[m]).relative_to(REPO).as_posix() for m in modules if m in schema_of}
        assert f"stages/{name}.py" in modules
        assert code_deps == modules | data, (f"{name}: extra {code_deps - modules - data}, "
                                             f"missing {(modules | data) - code_deps}")
        assert stage["cmd"].split(" ")[:3] == ["python", "-m", f"stages.{name}"]


def test_the_generator_rewrites_stale_code_deps_and_keeps_the_rest():
    committed = (REPO / "dvc.yaml").read_text()
    stale = committed.replace("      - da3_litert_farm/config/params.schema.json\n", "", 1)  # the params stage's
    stale = stale.replace("        - stages/export.py\n", "        - stages/export.py\n        - da3_litert_farm/gone.py\n")
    assert stale != committed
    assert dvc_yaml.generate(stale) == committed  # the data deps, comments, params and outs kept as written


def test_the_generator_refuses_a_stage_without_a_module():
    text = (REPO / "dvc.yaml").read_text().replace("\n  report:\n", "\n  reprot:\n")
    with pytest.raises(dvc_yaml.DvcYamlError, match="stage 'reprot' has no module stages/reprot.py"):
        dvc_yaml.generate(text)


def test_every_stage_module_is_a_dvc_stage():
    assert set(dvc_stages()) == set(STAGES) == {p.stem for p in (REPO / "stages").glob("*.py")} - {"__init__"}


def _outs(stage):
    names = []
    for section in ("outs", "metrics", "plots"):
        for out in stage.get(section, []):
            names.append(next(iter(out)) if isinstance(out, dict) else out)
    return names


# dvc.yaml's names of one cell, model and bundle, as its matrix and foreach spell them
CELL = "${item.model}-${item.tier}-${item.aspect}"
MODEL = "${key}"
BUNDLE = "${item.model}-${item.tier}"


def in_matrix(path_of_cell) -> str:
    """A per-cell path of the paths module, with the cell's folder as dvc.yaml's matrix spells it."""
    example = "m-1-a"
    spelled = f"{paths.MODELS.as_posix()}/${{item.model}}/${{item.tier}}/${{item.aspect}}"
    return path_of_cell(example).as_posix().replace(paths.cell_dir(example).as_posix(), spelled)


def test_outputs_are_the_paths_module():
    s = dvc_stages()
    assert _outs(s["params"]) == [paths.CHECKED_PARAMS.as_posix()]
    assert _outs(s["checkpoint"]) == [paths.checkpoint_dir(MODEL).as_posix()]
    assert _outs(s["patch"]) == [in_matrix(paths.patched_program), in_matrix(paths.patch_report)]
    assert _outs(s["export"]) == [in_matrix(paths.fp32_model), in_matrix(paths.export_report)]
    assert _outs(s["quantize"]) == [in_matrix(paths.fp16_model), in_matrix(paths.quantize_report)]
    assert _outs(s["validate"]) == [in_matrix(paths.lint_report), in_matrix(paths.depth_maps), in_matrix(paths.metrics)]
    assert _outs(s["gpu"]) == [in_matrix(paths.gpu_depth), in_matrix(paths.gpu_metrics)]
    assert _outs(s["bundle"]) == [paths.bundle_dir(BUNDLE).as_posix()]
    assert _outs(s["catalog"]) == [paths.CATALOG.as_posix()]
    assert _outs(s["report"]) == [paths.REPORT_PAGE.as_posix(), paths.REPORT_IMAGES.as_posix(),
                                  paths.PLOTS.as_posix(), paths.SUMMARY.as_posix()]
    # a bundle reads its own model and tier's folder only: a new tier or model leaves other bundles alone
    assert s["bundle"]["deps"][0] == paths.tier_dir("${item.model}", "${item.tier}").as_posix()
    assert {paths.MODELS.as_posix(), paths.BUNDLES.as_posix(), paths.CHECKPOINTS.as_posix()} <= set(s["catalog"]["deps"])
    assert {paths.MODELS.as_posix(), paths.CATALOG.as_posix()} <= set(s["report"]["deps"])
    assert paths.LOCAL_CHECKPOINTS.as_posix() in s["checkpoint"]["deps"]


def test_the_matrix_spans_models_tiers_and_aspects():
    s = dvc_stages()
    cells = {"model": "${models}", "tier": "${tiers}", "aspect": "${aspects}"}
    for name in PER_CELL_STAGES:
        assert s[name]["matrix"] == cells, name
        assert s[name]["cmd"] == f"python -m stages.{name} {CELL}"
    assert s["bundle"]["matrix"] == {"model": "${models}", "tier": "${tiers}"}
    assert s["bundle"]["cmd"] == f"python -m stages.bundle {BUNDLE}"
    checkpoint = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["checkpoint"]
    assert checkpoint["foreach"] == "${models}" and checkpoint["do"]["cmd"] == "python -m stages.checkpoint ${key}"


def test_only_the_params_check_persists_so_dvc_run_caches_every_build_stage():
    """DVC never run-caches a stage with a persistent output (dvc/stage/cache.py `_can_hash`)."""
    persistent = {(name, next(iter(out))) for name, stage in dvc_stages().items()
                  for section in ("outs", "metrics", "plots") for out in stage.get(section, [])
                  if isinstance(out, dict) and next(iter(out.values())).get("persist")}
    assert persistent == {("params", paths.CHECKED_PARAMS.as_posix())}


def test_the_params_check_runs_before_any_stage_that_removes_outputs():
    """Every other stage depends, directly or through its inputs, on a file the `params` stage writes."""
    s = dvc_stages()
    schema = json.loads(params_module.SCHEMA_FILE.read_text())
    assert set(s["params"]["params"]) == set(schema["properties"])  # every key params.yaml may set
    assert paths.checked_model(MODEL).as_posix() in s["checkpoint"]["deps"]
    assert paths.checked_cell(CELL).as_posix() in s["patch"]["deps"]
    upstream = {"export": paths.patched_program, "quantize": paths.fp32_model, "validate": paths.fp16_model,
                "gpu": paths.fp16_model}
    for name, made_by_earlier_stage in upstream.items():
        assert in_matrix(made_by_earlier_stage) in s[name]["deps"], name
    assert in_matrix(paths.depth_maps) in s["gpu"]["deps"]  # the official maps the GPU is compared with
    assert paths.BUNDLES.as_posix() in s["catalog"]["deps"]
    assert paths.CATALOG.as_posix() in s["report"]["deps"]


def test_per_cell_stages_read_only_their_aspect():
    s = dvc_stages()
    for name in ("patch", "validate", "gpu"):
        assert "aspects.${item.aspect}" in s[name]["params"] and "aspects" not in s[name]["params"]
        assert not {"models", "tiers"} & set(s[name]["params"])  # their cell's params file says both
    assert "validation" not in s["patch"]["params"] and "max_tensor_mib" in s["patch"]["params"]
    assert "params" not in s["export"] and "params" not in s["quantize"]


def _validation_keys_read(stage: str) -> set[str]:
    """The validation settings the stage's code reads: ValidationParams fields it names as attributes, and
    those that the ValidationParams methods it calls read (config/params.py, which defines and fills them,
    aside)."""
    fields = {f.name for f in dataclasses.fields(ValidationParams)}
    params_tree = ast.parse((REPO / "da3_litert_farm/config/params.py").read_text())
    (cls,) = [n for n in ast.walk(params_tree) if isinstance(n, ast.ClassDef) and n.name == "ValidationParams"]
    methods = {f.name: {n.attr for n in ast.walk(f) if isinstance(n, ast.Attribute) and n.attr in fields}
               for f in cls.body if isinstance(f, ast.FunctionDef)}
    read = set()
    for module in _python_imports(stage) - {"da3_litert_farm/config/params.py"}:
        tree = ast.parse((REPO / module).read_text())
        names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        read |= (names & fields).union(*(methods[m] for m in names & methods.keys()))
    return read


def test_each_stage_lists_the_validation_settings_its_code_reads():
    """A stage that lists validation keys one by one lists exactly those its code reads (DVC reruns it
    when one changes, and only then); one that reads them all lists `validation`."""
    for name, stage in dvc_stages().items():
        listed = {p.removeprefix("validation.") for p in stage.get("params", []) if p.startswith("validation.")}
        if "validation" not in stage.get("params", []):
            assert listed == _validation_keys_read(name), name
    assert _validation_keys_read("validate") and _validation_keys_read("gpu")  # the scan sees their reads


def test_stage_params_name_real_keys():
    """DVC reads each stage's params from params.yaml itself: every key must name a value there."""
    doc = yaml.safe_load((REPO / "params.yaml").read_text())

    def value_of(key: str):
        node = doc
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise KeyError(f"{key}: no {part!r} in params.yaml")
            node = node[part]
        return node

    checked = 0
    for name, stage in dvc_stages().items():
        for key in stage.get("params", []):
            # foreach over models, matrix over models x tiers x aspects: every value the template takes
            values = {"${key}": list(doc["models"]), "${item.model}": list(doc["models"]),
                      "${item.aspect}": list(doc["aspects"])}
            templates = [t for t in values if t in key] or [None]
            for template in templates:
                for value in values[template] if template else [None]:
                    resolved = key.replace(template, value) if template else key
                    assert value_of(resolved) is not None, (name, resolved)
                    checked += 1
    assert checked > len(STAGES)
    with pytest.raises(KeyError, match="validation.gpu_min_pearsn: no 'gpu_min_pearsn' in params.yaml"):
        value_of("validation.gpu_min_pearsn")  # a misspelt key is caught, not walked past


def test_every_key_a_stage_tracks_is_required_so_the_params_check_refuses_its_absence():
    """DVC stops at the first stage whose tracked key params.yaml lacks, which can be hours into a build (an
    optional validation.gpu_mode_gates stopped a 12-cell farm at its first GPU stage): each must be required by
    params.schema.json, which the params stage checks before anything is built."""
    schema = params_module.load_schema()
    tracked = {key for stage in dvc_stages().values() for key in stage.get("params", [])}
    checked = 0
    for key in tracked:
        node = schema
        for part in key.split("."):
            if part.startswith("${"):  # a matrix item: the params check makes each from params.yaml's own keys
                break
            assert part in node.get("required", []), f"dvc.yaml tracks {key}, which params.schema.json does not require"
            node = node["properties"][part]
            checked += 1
    assert checked >= len(tracked) > 10


def test_dvc_metrics_and_plots_read_only_the_summary():
    """Every figure stays in the per-aspect JSON; `dvc metrics diff` shows only the headline ones."""
    s = dvc_stages()
    assert {name for name, stage in s.items() if "metrics" in stage} == {"report"}
    assert not [name for name, stage in s.items() if "plots" in stage]  # only the top-level definitions
    assert [next(iter(m)) for m in s["report"]["metrics"]] == [paths.SUMMARY.as_posix()]
    doc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    for plot in doc["plots"]:
        (definition,) = plot.values()
        (source,) = definition["y"]  # every plot reads the report's rows, one per aspect
        assert source == paths.PLOTS.as_posix()
