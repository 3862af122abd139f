"""The fenced blocks of README.md and docs/*.md, read one way by every test that runs or checks them.

A test runs a shell block as printed by reading it here, `doc_block(PAGE, HEADING)`: the first shell block after
HEADING (any text of the page) in PAGE. Its fence is preceded by `<!-- run by tests/FILE.py::TEST -->`; a shell block
no test runs starts with `# not run by a test: REASON` instead. tests/test_doc_examples.py checks that every shell
block is one or the other, and that each marker's test reads its block through this module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHELL = frozenset({"sh", "bash", "shell", "console"})
NOT_RUN = "# not run by a test"
RUN_BY = re.compile(r"<!-- run by (tests/test_\w+\.py)::(test_\w+) -->")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # its opening fence, from 1
    lang: str  # the fence's info string: sh, kotlin, ... ("" for a bare fence)
    body: tuple[str, ...]  # the lines between the fences
    before: str  # the line just before the opening fence

    @property
    def lines(self) -> list[str]:
        """Its non-blank lines, comments kept (a recipe's comment may be a step)."""
        return [line for line in self.body if line.strip()]

    @property
    def commands(self) -> list[str]:
        """Its commands as bash reads them: comment lines dropped, a line ending in a backslash joined to the next."""
        found, current = [], []
        for line in self.body:
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            current.append(line)
            if not line.endswith("\\"):
                found.append("\n".join(current))
                current = []
        return found + (["\n".join(current)] if current else [])

    @property
    def shell(self) -> bool:
        return self.lang in SHELL

    @property
    def run_by(self) -> tuple[str, str] | None:
        """(tests/FILE.py, TEST) of the marker before its fence."""
        match = RUN_BY.fullmatch(self.before.strip())
        return (match.group(1), match.group(2)) if match else None

    @property
    def not_run(self) -> str | None:
        """The reason its first line gives for no test running it."""
        first = self.body[0].strip() if self.body else ""
        return first[len(NOT_RUN):].lstrip(" :") if first.startswith(NOT_RUN) else None

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    blocks, start, body = [], None, []
    lines = page.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.lstrip().startswith("```"):
            if start is not None:
                body.append(line)
        elif start is None:
            start, body = number, []
        else:
            before = lines[start - 2] if start > 1 else ""
            blocks.append(Block(page, start, lines[start - 1].strip()[3:].strip(), tuple(body), before))
            start = None
    return blocks


def doc_block(page: str, heading: str, root: Path = REPO) -> Block:
    """The first shell block after the first occurrence of `heading` in `page` (relative to `root`)."""
    path = root / page
    text = path.read_text()
    assert heading in text, f"{path} has no {heading!r}: the example a test runs moved"
    heading_line = text[:text.index(heading)].count("\n") + 1
    found = [b for b in fenced_blocks(path) if b.shell and b.line > heading_line]
    assert found, f"{path} has no shell block after {heading!r}"
    return found[0]


def readme_block(heading: str) -> list[str]:
    """The lines of the first shell block after `heading` in README.md, comments kept."""
    return doc_block("README.md", heading).lines


def blocks_read_by(function: ast.FunctionDef) -> list[tuple[str, str]]:
    """(page, heading) of every block `function` reads from the repository's own pages: its calls of doc_block and
    readme_block with literal arguments and no `root` (a call with `root` reads a copy)."""
    found = []
    for node in ast.walk(function):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or \
                any(k.arg == "root" for k in node.keywords):
            continue
        args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if node.func.id == "doc_block" and len(args) == len(node.args) == 2:
            found.append((args[0], args[1]))
        elif node.func.id == "readme_block" and len(args) == len(node.args) == 1:
            found.append(("README.md", args[0]))
    return found
