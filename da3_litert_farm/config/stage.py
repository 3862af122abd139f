"""The one skeleton every DVC stage (stages/*.py) runs in.

    def main(argv=None) -> int:
        return stage.run("export", __doc__, export, over="cell", argv=argv)

parses the arguments (the cell, model or bundle a stage of dvc.yaml's matrix runs for, and any extra
flags), starts the clock, loads params.yaml, resolves that name and calls the stage's body with a Run.
Any FarmError, from the params check to a failed conversion, ends as one line on stderr, `stage: message`
(`stage small-896-9x16: message`), and exit status 1; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from da3_litert_farm.config.params import Params, load_params
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.core.errors import FarmError


@dataclass
class Run:
    """What a stage's body gets: its arguments, params (None for a stage that reads none) and what it runs for."""

    label: str  # "export small-896-9x16": how the stage names itself in what it prints
    args: argparse.Namespace
    params: Params | None = None
    cell: Cell | None = None  # over="cell"
    model: str | None = None  # over="model": a key of params.yaml's models
    bundle: list[Cell] | None = None  # over="bundle": the bundle's cells (its name is args.name)
    started: float = field(default_factory=time.time)

    def seconds(self) -> float:
        """Wall time since the stage started, parsing and params included."""
        return time.time() - self.started

    def failed(self, failures: Iterable[str]) -> int:
        """A failed gate: one `label: FAILED reason` line per failure on stderr; the exit status (1)."""
        for failure in failures:
            print(f"{self.label}: FAILED {failure}", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """The error's message on one line: a DVC log holds one line per failure (YAML errors span several)."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


_OVER = {"cell": "a cell of params.yaml's matrix, MODEL-TIER-ASPECT (e.g. small-896-9x16)",
         "model": "a model name in params.yaml (e.g. small)",
         "bundle": "a bundle of params.yaml's matrix, MODEL-TIER (e.g. small-896)"}


def run(name: str, doc: str, body: Callable[[Run], int | None], *, over: str | None = None, params: bool = True,
        checkpoint_files: bool = False, flags: Callable[[argparse.ArgumentParser], None] | None = None,
        argv: list[str] | None = None) -> int:
    """Run stage `name` (its module docstring `doc` is the help) and return its exit status.

    over: "cell", "model" or "bundle": takes one such name from params.yaml as its one positional argument.
    params: loads params.yaml first (checkpoint_files: also checks a local checkpoint's files exist).
    flags: adds the stage's own options to the parser.
    body: does the work; returns the exit status (None: 0).
    """
    parser = argparse.ArgumentParser(prog=f"python -m stages.{name}", description=doc.splitlines()[0])
    if over:
        parser.add_argument("name", help=_OVER[over])
    if flags is not None:
        flags(parser)
    args = parser.parse_args(argv)
    state = Run(f"{name} {args.name}" if over else name, args)
    try:
        if params:
            state.params = load_params(checkpoint_files=checkpoint_files)
            if over == "cell":
                state.cell = state.params.cell(args.name)
            elif over == "model":
                state.model = state.params.model(args.name)
            elif over == "bundle":
                state.bundle = state.params.bundle(args.name)
        status = body(state)
    except FarmError as exc:
        print(f"{state.label}: {one_line(exc)}", file=sys.stderr)
        return 1
    return 0 if status is None else status
