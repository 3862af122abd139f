"""The one skeleton every DVC stage (stages/*.py) runs in.

    def main(argv=None) -> int:
        return stage.run("export", __doc__, export, over="cell", argv=argv)

parses the arguments (the cell, model or bundle a stage of dvc.yaml's matrix runs for, and any extra
flags), starts the clock, loads params.yaml, resolves that name and calls the stage's body with a Run.
Any FarmError, from the params check to a failed conversion, ends as one line on stderr, `stage: message`
(`stage small-896-9x16: message`), and exit status 1; any other exception is a bug and keeps its traceback.
What native libraries write goes to the stage's log file instead of the terminal (config.native_log);
a failure names that file where it holds anything.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from da3_litert_farm.config import native_log
from da3_litert_farm.config.params import Params, load_params
from da3_litert_farm.core import paths
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.pipeline import stage_name


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
    log: native_log.NativeLog = native_log.NativeLog(None)  # where native libraries' output goes

    def seconds(self) -> float:
        """Wall time since the stage started, parsing and params included."""
        return time.time() - self.started

    def failed(self, failures: Iterable[str]) -> int:
        """A failed gate: one `label: FAILED reason` line per failure on stderr, then the native log's path where
        it holds anything; the exit status (1)."""
        for failure in failures:
            print(f"{self.label}: FAILED {failure}", file=sys.stderr)
        if (log := self.log.written()) is not None:
            print(f"{self.label}: native log: {log}", file=sys.stderr)
        return 1

    def say(self, line: str) -> None:
        """A progress line of a stage that runs for minutes, with the seconds since it started."""
        print(f"{self.label}: {line} [{self.seconds():.0f} s]", flush=True)


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
        # From the command line (argv None) the process is this stage: what native code says at exit goes there too.
        with native_log.to_file(paths.native_log(stage_name(name, args.name) if over else name),
                                until_exit=argv is None) as state.log:
            return _body(state, body, over, params, checkpoint_files)
    except FarmError as exc:
        log = state.log.written()
        print(f"{state.label}: {one_line(exc)}" + (f" (native log: {log})" if log else ""), file=sys.stderr)
        return 1
    except Exception:  # a bug: its traceback follows, and where native code said something, where that is
        if (log := state.log.written()) is not None:
            print(f"{state.label}: native log: {log}", file=sys.stderr)
        raise


def _body(state: Run, body: Callable[[Run], int | None], over: str | None, params: bool,
          checkpoint_files: bool) -> int:
    args = state.args
    if params:
        state.params = load_params(checkpoint_files=checkpoint_files)
        if over == "cell":
            state.cell = state.params.cell(args.name)
        elif over == "model":
            state.model = state.params.model(args.name)
        elif over == "bundle":
            state.bundle = state.params.bundle(args.name)
    status = body(state)
    return 0 if status is None else status
