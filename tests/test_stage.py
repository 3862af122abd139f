"""The stage skeleton (da3_litert_farm.config.stage): a farm error ends a stage as one line and exit 1, a bug
keeps its traceback. The real stages run as DVC runs them, in a temporary folder with broken inputs."""

from __future__ import annotations

import shutil
import sys

import pytest
import yaml

from da3_litert_farm.config import stage
from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.core import paths
from tests.farm_repo import REPO, run_stage


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A folder holding the repository's params.yaml, as the current directory; its first cell's name."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path, next(iter(load_params(REPO / "params.yaml", checkpoint_files=False).cells))


def _one_line_failure(proc) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_garbage_patched_program_ends_export_in_one_line_naming_the_aspect_and_file(folder):
    root, aspect = folder
    program = paths.patched_program(aspect)
    program.parent.mkdir(parents=True)
    program.write_text("not a torch.export archive\n")
    line = _one_line_failure(run_stage("export", aspect, cwd=root))
    assert line.startswith(f"export {aspect}: {program} is not a loadable torch.export program"), line
    assert "BadZipFile" in line  # the loader's own reason, on the same line
    assert not paths.fp32_model(aspect).exists() and not paths.export_report(aspect).exists()


def test_a_garbage_fp32_file_ends_quantize_in_one_line_naming_the_file(folder):
    root, aspect = folder
    fp32 = paths.fp32_model(aspect)
    fp32.parent.mkdir(parents=True)
    fp32.write_bytes(b"TFL3 but not a flatbuffer")
    line = _one_line_failure(run_stage("quantize", aspect, cwd=root))
    assert line.startswith(f"quantize {aspect}: ai-edge-quantizer could not quantize {fp32} to FP16: "), line
    assert not paths.fp16_model(aspect).exists() and not paths.quantize_report(aspect).exists()


def test_a_cell_not_in_params_ends_the_stage_in_one_line(folder):
    root, aspect = folder
    assert "21x9" not in yaml.safe_load((root / "params.yaml").read_text())["aspects"]
    for name in ("small-896-21x9", "21x9"):
        line = _one_line_failure(run_stage("export", name, cwd=root))
        assert line.startswith(f"export {name}: cell '{name}' is not in params.yaml's matrix (MODEL-TIER-ASPECT); "
                               "configured: ["), line
        assert repr(aspect) in line


def test_a_multi_line_params_error_is_printed_on_one_line(folder, capsys):
    root, _ = folder
    (root / "params.yaml").write_text("aspects: {9x16: [\n")  # PyYAML's message spans several lines
    called = []
    assert stage.run("patch", "doc", called.append, over="cell", argv=["small-896-9x16"]) == 1
    assert called == []  # the body never runs on a bad params.yaml
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("patch small-896-9x16: params.yaml is not valid YAML: "), err
    assert "expected the node content, but found '<stream end>'" in err and "line 2, column 1" in err


def test_a_bug_keeps_its_traceback(folder):
    def body(run):
        return {}["missing"]

    with pytest.raises(KeyError, match="missing"):
        stage.run("report", "doc", body, params=False, argv=[])


def test_the_body_gets_the_cell_params_and_flags_and_its_status_is_the_exit_status(folder):
    _, aspect = folder
    seen = []

    def body(run):
        seen.append((run.label, run.cell.name, run.params.cell(aspect) is run.cell, run.args.write))
        return 3

    def flags(parser):
        parser.add_argument("--write", action="store_true")

    assert stage.run("gpu", "doc", body, over="cell", flags=flags, argv=[aspect, "--write"]) == 3
    assert seen == [(f"gpu {aspect}", aspect, True, True)]
    assert stage.run("gpu", "doc", lambda run: None, over="cell", argv=[aspect]) == 0


def test_the_checkpoint_and_bundle_stages_take_a_model_and_a_bundle_of_the_matrix(folder):
    seen = []
    assert stage.run("checkpoint", "doc", lambda run: seen.append(run.model), over="model", argv=["small"]) == 0
    assert stage.run("bundle", "doc", lambda run: seen.append([c.name for c in run.bundle]), over="bundle",
                     argv=["small-896"]) == 0
    assert seen == ["small", ["small-896-9x16", "small-896-3x4", "small-896-4x3", "small-896-16x9"]]


def test_failed_gates_print_one_line_each_and_exit_1(capsys):
    run = stage.Run("validate 9x16", None)
    assert run.failed(["pearson 0.9 < 0.999", "mean rel 0.1 > 0.01"]) == 1
    assert capsys.readouterr().err == ("validate 9x16: FAILED pearson 0.9 < 0.999\n"
                                       "validate 9x16: FAILED mean rel 0.1 > 0.01\n")


def test_every_farm_error_is_caught_by_the_skeleton(folder, capsys):
    """ParamsError is a FarmError, and still a ValueError for the code that catches that."""
    def body(run):
        raise ParamsError("validation.photos: 'x' is not a known photo")

    assert stage.run("catalog", "doc", body, params=False, argv=[]) == 1
    assert capsys.readouterr().err == "catalog: validation.photos: 'x' is not a known photo\n"
    assert issubclass(ParamsError, ValueError)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
