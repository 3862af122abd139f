"""The architecture in pyproject.toml ([tool.importlinter]) holds, and the checker catches a breach."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, env=env, capture_output=True, text=True)


def test_the_import_contracts_are_kept():
    proc = lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 4 kept, 0 broken." in proc.stdout


def _copy(tmp_path: Path) -> Path:
    for name in ("da3_litert_farm", "stages"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def test_torch_in_the_core_breaks_the_light_client_contract(tmp_path):
    root = _copy(tmp_path)
    aspects = root / "da3_litert_farm" / "core" / "aspects.py"
    aspects.write_text(aspects.read_text() + "\n\ndef _heavy():\n    import torch  # noqa: F401\n")
    proc = lint_imports(root)
    assert proc.returncode == 1
    assert "The client and the core stay light" in proc.stdout and "BROKEN" in proc.stdout
    assert "da3_litert_farm.core.aspects -> torch" in proc.stdout


def test_a_stage_importing_a_stage_and_an_upward_import_are_both_caught(tmp_path):
    root = _copy(tmp_path)
    (root / "stages" / "export.py").write_text((root / "stages" / "export.py").read_text()
                                               + "\nfrom stages import patch  # noqa: E402,F401\n")
    (root / "da3_litert_farm" / "model" / "stress.py").write_text(
        (root / "da3_litert_farm" / "model" / "stress.py").read_text()
        + "\nfrom da3_litert_farm.checks import agreement  # noqa: E402,F401\n")
    proc = lint_imports(root)
    assert proc.returncode == 1
    assert "Contracts: 2 kept, 2 broken." in proc.stdout
    assert "stages.export is not allowed to import stages.patch" in proc.stdout
    assert "da3_litert_farm.model.stress -> da3_litert_farm.checks.agreement" in proc.stdout


def test_package_init_files_hold_only_a_docstring():
    """dvc.yaml lists no __init__.py as a stage's code (tests/test_dvc_yaml.py): they must hold none."""
    for init in (REPO / "da3_litert_farm").rglob("__init__.py"):
        body = ast.parse(init.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), init
