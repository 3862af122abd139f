"""dvc.yaml names exactly the code each stage runs and the paths da3_litert_farm.core.paths defines."""

import ast
from pathlib import Path

import yaml

from da3_litert_farm.core import paths
from da3_litert_farm.core.pipeline import STAGES

REPO = Path(__file__).resolve().parents[1]
# The data files a module reads at run time: a stage whose code includes the module depends on them too.
DATA_FILES = {"da3_litert_farm/config/params.py": {"da3_litert_farm/config/params.schema.json"},
              "da3_litert_farm/ops/catalog.py": {"da3_litert_farm/ops/catalog.schema.json"}}


def _module_file(dotted: str) -> Path | None:
    """The .py file of a dotted module name under the repository, or None (a package, a name, a library)."""
    path = REPO / Path(*dotted.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def code_imported_by(stage: str) -> set[str]:
    """stages/<stage>.py and every da3_litert_farm module it imports, at any depth (function-level
    imports included), as repository paths. Package __init__ files hold only docstrings
    (tests/test_contracts.py) and are not code a stage depends on."""
    seen, todo = set(), [REPO / "stages" / f"{stage}.py"]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("da3_litert_farm"):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("da3_litert_farm")]
            todo += [f for f in map(_module_file, names) if f is not None]
    return {p.relative_to(REPO).as_posix() for p in seen}


def dvc_stages():
    doc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    return {name: (stage["do"] if "foreach" in stage else stage) for name, stage in doc["stages"].items()}


def test_every_stage_depends_on_exactly_the_code_it_runs():
    for name, stage in dvc_stages().items():
        code_deps = {d for d in stage["deps"] if d.startswith(("da3_litert_farm/", "stages/"))}
        code = code_imported_by(name)
        expected = code.union(*(DATA_FILES.get(module, set()) for module in code))
        assert code_deps == expected, f"{name}: extra {code_deps - expected}, missing {expected - code_deps}"
        assert stage["cmd"].split(" ")[:3] == ["python", "-m", f"stages.{name}"]


def test_every_stage_module_is_a_dvc_stage():
    assert set(dvc_stages()) == set(STAGES) == {p.stem for p in (REPO / "stages").glob("*.py")} - {"__init__"}


def _outs(stage):
    names = []
    for section in ("outs", "metrics", "plots"):
        for out in stage.get(section, []):
            names.append(next(iter(out)) if isinstance(out, dict) else out)
    return names


def test_outputs_are_the_paths_module():
    s = dvc_stages()
    key = "${key}"
    assert _outs(s["params"]) == [paths.CHECKED_PARAMS.as_posix()]
    assert _outs(s["checkpoint"]) == [paths.CHECKPOINT_DIR.as_posix()]
    assert _outs(s["patch"]) == [paths.patched_program(key).as_posix(), paths.patch_report(key).as_posix()]
    assert _outs(s["export"]) == [paths.fp32_model(key).as_posix(), paths.export_report(key).as_posix()]
    assert _outs(s["quantize"]) == [paths.fp16_model(key).as_posix(), paths.quantize_report(key).as_posix()]
    assert _outs(s["validate"]) == [paths.lint_report(key).as_posix(), paths.depth_maps(key).as_posix(),
                                    paths.metrics(key).as_posix()]
    assert _outs(s["gpu"]) == [paths.gpu_depth(key).as_posix(), paths.gpu_metrics(key).as_posix()]
    assert _outs(s["bundle"]) == [paths.BUNDLE_DIR.as_posix()]
    assert {paths.BUNDLE_MODEL.parent, paths.BUNDLE_RECORD.parent} == {paths.BUNDLE_DIR}
    assert _outs(s["catalog"]) == [paths.CATALOG.as_posix()]
    assert _outs(s["report"]) == [paths.REPORT_PAGE.as_posix(), paths.REPORT_IMAGES.as_posix(),
                                  paths.PLOTS.as_posix(), paths.SUMMARY.as_posix()]
    assert paths.MODELS.as_posix() in s["bundle"]["deps"]
    assert {paths.MODELS.as_posix(), paths.BUNDLE_DIR.as_posix()} <= set(s["catalog"]["deps"])
    assert {paths.MODELS.as_posix(), paths.CATALOG.as_posix()} <= set(s["report"]["deps"])
    assert paths.LOCAL_CHECKPOINTS.as_posix() in s["checkpoint"]["deps"]


def test_only_the_params_check_persists_so_dvc_run_caches_every_build_stage():
    """DVC never run-caches a stage with a persistent output (dvc/stage/cache.py `_can_hash`)."""
    persistent = {(name, next(iter(out))) for name, stage in dvc_stages().items()
                  for section in ("outs", "metrics", "plots") for out in stage.get(section, [])
                  if isinstance(out, dict) and next(iter(out.values())).get("persist")}
    assert persistent == {("params", paths.CHECKED_PARAMS.as_posix())}


def test_the_params_check_runs_before_any_stage_that_removes_outputs():
    """Every other stage depends, directly or through its inputs, on a file the `params` stage writes."""
    s = dvc_stages()
    assert set(s["params"]["params"]) == {"checkpoint", "long_side", "max_tensor_mib", "aspects", "validation",
                                          "catalog"}
    assert paths.CHECKED_CHECKPOINT.as_posix() in s["checkpoint"]["deps"]
    assert paths.checked_aspect("${key}").as_posix() in s["patch"]["deps"]
    upstream = {"export": paths.patched_program, "quantize": paths.fp32_model, "validate": paths.fp16_model,
                "gpu": paths.fp16_model}
    for name, made_by_earlier_stage in upstream.items():
        assert made_by_earlier_stage("${key}").as_posix() in s[name]["deps"], name
    assert paths.depth_maps("${key}").as_posix() in s["gpu"]["deps"]  # the official maps the GPU is compared with
    assert paths.MODELS.as_posix() in s["bundle"]["deps"] and paths.BUNDLE_DIR.as_posix() in s["catalog"]["deps"]
    assert paths.CATALOG.as_posix() in s["report"]["deps"]


def test_per_aspect_stages_read_only_their_aspect():
    s = dvc_stages()
    for name in ("patch", "validate", "gpu"):
        assert "aspects.${key}" in s[name]["params"] and "aspects" not in s[name]["params"]
    assert "validation" not in s["patch"]["params"] and "max_tensor_mib" in s["patch"]["params"]
    assert {p for p in s["validate"]["params"] if p.startswith("validation.")} == {
        "validation.min_pearson", "validation.max_mean_rel", "validation.photos"}
    assert {p for p in s["gpu"]["params"] if p.startswith("validation.")} == {
        "validation.gpu", "validation.gpu_min_pearson", "validation.gpu_max_mean_rel", "validation.gpu_photos"}
    assert "params" not in s["export"] and "params" not in s["quantize"]


def test_stage_params_name_real_keys():
    """DVC reads each stage's params from params.yaml itself: every key must name a value there."""
    import pytest

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
            for aspect in doc["aspects"] if "${key}" in key else [None]:  # foreach: every aspect
                resolved = key.replace("${key}", aspect) if aspect else key
                assert value_of(resolved) is not None, (name, resolved)
                checked += 1
    assert checked > len(STAGES)
    with pytest.raises(KeyError, match="validation.gpu_min_pearsn: no 'gpu_min_pearsn' in params.yaml"):
        value_of("validation.gpu_min_pearsn")  # a misspelt key is caught, not walked past


def test_dvc_metrics_and_plots_read_only_the_summary():
    """Every figure stays in the per-aspect JSON; `dvc metrics diff` shows only the headline ones."""
    s = dvc_stages()
    assert {name for name, stage in s.items() if "metrics" in stage} == {"report"}
    assert not [name for name, stage in s.items() if "plots" in stage]  # only the top-level definitions
    assert [next(iter(m)) for m in s["report"]["metrics"]] == [paths.SUMMARY.as_posix()]
    doc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    for plot in doc["plots"]:
        (definition,) = plot.values()
        assert definition["y"] == {paths.PLOTS.as_posix(): "aspect"}
