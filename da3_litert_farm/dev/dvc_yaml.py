"""dvc.yaml's code deps, derived from the code.

    python -m da3_litert_farm.dev.dvc_yaml [--write]      (make dvc-yaml)

Each stage lists the code it runs, so that an edit reruns only the stages it affects: stages/<stage>.py,
every da3_litert_farm module that imports, at any depth (imports inside functions included), and the data
files those modules read (a non-Python file beside a module whose name its source spells, such as
params.schema.json). Package __init__ files hold only a docstring (tests/test_contracts.py) and are not
listed. The rest of dvc.yaml (comments, data deps, params, outs) is written by hand and kept as it is;
only the code entries of each `deps:` list are rewritten. Without --write it checks, and exits 1 if
dvc.yaml is stale (tests/test_dvc_yaml.py does the same).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from da3_litert_farm.core.errors import FarmError

REPO = Path(__file__).resolve().parents[2]
DVC_YAML = "dvc.yaml"
PACKAGE = "da3_litert_farm"
CODE_PREFIXES = (f"{PACKAGE}/", "stages/")  # a dep with either prefix is code, and generated

_STAGE = re.compile(r"^  ([A-Za-z_][\w-]*):\s*(#.*)?$")  # a stage under `stages:`, two spaces in
_DEPS = re.compile(r"^(\s+)deps:\s*$")


class DvcYamlError(FarmError, RuntimeError):
    """dvc.yaml cannot be regenerated: a stage without a module or without a deps list."""


def _module_file(dotted: str, root: Path) -> Path | None:
    """The .py file of a dotted name under `root`, or None (a package, a name in a module, a library)."""
    path = (root / Path(*dotted.split("."))).with_suffix(".py")
    return path if path.is_file() else None


def _imported_names(path: Path, root: Path) -> list[str]:
    """Every dotted name an import statement in `path` could load from this package, anywhere in it."""
    package = path.parent.relative_to(root).parts
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] if node.level else ())
            module = ".".join(filter(None, (base, node.module)))
            if module.split(".")[0] == PACKAGE:
                names += [module] + [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE]
    return names


def _data_files(path: Path) -> set[Path]:
    """The non-Python files beside module `path` whose names its source spells (the files it reads)."""
    beside = {p.name: p for p in path.parent.iterdir() if p.is_file() and p.suffix not in (".py", ".pyc")}
    return {beside[node.value] for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in beside}


def stage_code(stage: str, root: Path = REPO) -> list[str]:
    """The code deps of `stage`, as repository paths: its module first, then the library's, sorted."""
    module = root / "stages" / f"{stage}.py"
    if not module.is_file():
        raise DvcYamlError(f"dvc.yaml stage {stage!r} has no module stages/{stage}.py")
    seen, todo = set(), [module]
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo += [f for f in (_module_file(n, root) for n in _imported_names(path, root)) if f is not None]
    library = {p for p in seen if p != module}
    library |= {data for p in library for data in _data_files(p)}
    return [module.relative_to(root).as_posix(), *sorted(p.relative_to(root).as_posix() for p in library)]


def generate(text: str, root: Path = REPO) -> str:
    """dvc.yaml's `text` with each stage's code deps replaced by the ones derived from the code."""
    lines, out, stage, in_stages, done = text.splitlines(keepends=True), [], None, False, set()
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if re.match(r"^\S", line) and not line.startswith("#"):  # a top-level key
            in_stages, stage = line.startswith("stages:"), None
        elif in_stages and (m := _STAGE.match(line)):
            stage = m.group(1)
        elif stage and (m := _DEPS.match(line)):
            item = m.group(1) + "  - "
            while i < len(lines) and lines[i].startswith(item):
                if not lines[i][len(item):].startswith(CODE_PREFIXES):
                    out.append(lines[i])  # a data dep: hand-written, kept in place
                i += 1
            out += [f"{item}{path}\n" for path in stage_code(stage, root)]
            done.add(stage)
    stages = {m.group(1) for line in _stages_section(lines) if (m := _STAGE.match(line))}
    if missing := sorted(stages - done):
        raise DvcYamlError(f"dvc.yaml stages without a deps list: {missing}")
    return "".join(out)


def _stages_section(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("stages:"))
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^[^\s#]", lines[i])), len(lines))
    return lines[start + 1:end]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.dev.dvc_yaml", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite dvc.yaml (default: check it is current)")
    args = parser.parse_args(argv)
    path = REPO / DVC_YAML
    text = path.read_text()
    try:
        generated = generate(text)
    except DvcYamlError as exc:
        print(f"dvc.yaml: {exc}", file=sys.stderr)
        return 1
    if args.write:
        if generated != text:
            path.write_text(generated)
        print(f"dvc.yaml: code deps {'rewritten' if generated != text else 'already current'}")
        return 0
    if generated != text:
        print("dvc.yaml: the code deps differ from the code's imports: run `make dvc-yaml`", file=sys.stderr)
        return 1
    print("dvc.yaml: code deps current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
