"""What the client prints and writes, shown in the docs as the code prints it, never typed by hand.

    python -m da3_litert_farm.dev.doc_outputs record artifacts/catalog.json --commit C  # a shipped-params build
    python -m da3_litert_farm.dev.doc_outputs README.md docs/*.md          # rewrite the marked blocks
    python -m da3_litert_farm.dev.doc_outputs --check README.md docs/*.md  # exit 1 where one is stale

`record` keeps a catalog the farm built from the shipped params.yaml as docs/outputs/catalog.json, with where and at
which commit it was built. A page shows an output between `<!-- output:NAME begin -->` and `<!-- output:NAME end -->`:
this command runs the client's own functions (`choose`, `sidecar`) on that catalog and writes what they return there,
with a line saying so. The recorded catalog must hold exactly the cells the current params.yaml plans, with their
shapes: otherwise every render is refused, naming the cells that differ (rebuild, then `record`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from da3_litert_farm.client.choice import choose
from da3_litert_farm.client.sidecars import model_file_name, sidecar
from da3_litert_farm.core import fileio
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.models import OUTPUTS
from da3_litert_farm.dev.figures import measured_on, replace_sections

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "docs" / "outputs" / "catalog.json"
BEGIN = re.compile(r"<!-- output:([A-Za-z0-9_-]+) begin -->")
EXAMPLE_REPO = "git@example.com:ml/da3-farm.git"  # the publisher's repository a shown sidecar names
UNROTATED = (4032, 3024)  # a phone sensor's landscape frame, passed as the sensor gives it
PORTRAIT = (3024, 4032)  # the same frame as a portrait app feeds it


class OutputsError(FarmError, ValueError):
    pass


def folded(value, indent: int = 0) -> str:
    """JSON as the docs show it: two-space indents, a list of numbers or strings on one line."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        items = [f'{pad}  {json.dumps(k)}: {folded(v, indent + 2)}' for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(f"{pad}  {folded(v, indent + 2)}" for v in value) + f"\n{pad}]"
    return json.dumps(value)


def load_recorded(path: Path = RECORDED) -> tuple[dict, dict]:
    """(the recorded catalog, where it was built)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise OutputsError(f"no {path}: build the shipped params.yaml (make farm), then `python -m "
                           "da3_litert_farm.dev.doc_outputs record artifacts/catalog.json --commit C`") from None
    return doc["catalog"], doc["measured_on"]


def planned_shapes() -> dict[str, tuple[int, int]]:
    """Each cell the current params.yaml plans, with its H x W."""
    from da3_litert_farm.config.params import load_params  # the farm's side: the light client never renders docs
    return {name: (cell.height, cell.width) for name, cell in load_params(checkpoint_files=False).cells.items()}


def stale_cells(catalog: dict, planned: dict[str, tuple[int, int]]) -> list[str]:
    """How the catalog's cells differ from the planned ones: one line per cell missing, extra or reshaped."""
    built = {m["cell"]: (m["height"], m["width"]) for m in catalog["models"]}
    lines = [f"{name}: planned {h}x{w}, not in the recorded catalog" for name, (h, w) in planned.items()
             if name not in built]
    lines += [f"{name}: in the recorded catalog, not planned by params.yaml" for name in built if name not in planned]
    lines += [f"{name}: planned {planned[name][0]}x{planned[name][1]}, recorded {h}x{w}"
              for name, (h, w) in built.items() if name in planned and planned[name] != (h, w)]
    return lines


def _select(catalog: dict, camera: tuple[int, int]) -> str:
    return choose(catalog, None, camera)[1]


def _sidecar(catalog: dict, camera: tuple[int, int]) -> dict:
    entry, reason = choose(catalog, None, camera)
    return sidecar(catalog, entry, EXAMPLE_REPO, reason, model_file_name(catalog, entry))


# NAME -> (fence language, the text the code returns, which code returned it, whether from the recorded catalog)
RENDERS: dict[str, tuple[str, Callable[[dict], str], str, bool]] = {
    "select-unrotated": ("", lambda c: _select(c, UNROTATED),
                         f"the reason lines of `farm select --camera {UNROTATED[0]}x{UNROTATED[1]}` "
                         "(`choose()` in client/choice.py)", True),
    "sidecar-portrait": ("json", lambda c: folded(_sidecar(c, PORTRAIT)),
                         f"`sidecar()` in client/sidecars.py for `--camera {PORTRAIT[0]}x{PORTRAIT[1]}`", True),
    "recommended-mode": ("json", lambda c: '"recommended_mode": ' + folded(_sidecar(c, PORTRAIT)["gpu"]
                                                                             ["recommended_mode"]),
                         f"`gpu.recommended_mode` of `sidecar()` for `--camera {PORTRAIT[0]}x{PORTRAIT[1]}`", True),
    "metric-metres": ("json", lambda c: '"metres": ' + folded(OUTPUTS["metric"]["metres"]),
                      "`OUTPUTS[\"metric\"]` in core/models.py, which every metric preset's catalog entry and "
                      "sidecar take", False),
}


def render(name: str, catalog: dict, on: dict) -> str:
    """The marked section's text: the fenced output, then which code returned it, from which catalog."""
    if name not in RENDERS:
        raise OutputsError(f"output:{name} is not one the code renders; known: {', '.join(RENDERS)}")
    lang, make, what, from_catalog = RENDERS[name]
    source = (f" on the catalog the farm built from the shipped params.yaml at commit {on['commit']} on {on['date']} "
              f"({on['cpu']}; {on['weights']}; [docs/outputs/catalog.json](outputs/catalog.json))"
              if from_catalog else "")
    return (f"```{lang}\n{make(catalog)}\n```\n\n<sub>Rendered from {what}{source} by "
            f"`python -m da3_litert_farm.dev.doc_outputs`.</sub>")


def rewrite(text: str, where: str, catalog: dict, on: dict) -> tuple[str, list[str]]:
    """`text` with each marked section replaced by its render, and the names of those that changed."""
    return replace_sections(text, where, "output", lambda name: render(name, catalog, on), OutputsError)


def update(paths: list[Path], *, check: bool, recorded: Path = RECORDED) -> tuple[int, list[str]]:
    """Rewrite (check: only compare) the marked sections of each page; (sections found, stale ones as
    'PAGE: output:NAME'). Refused while the recorded catalog's cells are not the planned ones."""
    catalog, on = load_recorded(recorded)
    if stale := stale_cells(catalog, planned_shapes()):
        raise OutputsError(f"{recorded} was built from other params than params.yaml plans now: "
                           + "; ".join(stale) + ". Build the shipped params (make farm) and record its catalog")
    found, changed = 0, []
    for path in paths:
        text = path.read_text()
        new, names = rewrite(text, str(path), catalog, on)
        found += len(BEGIN.findall(text))
        changed += [f"{path}: output:{name}" for name in names]
        if names and not check:
            fileio.write_bytes(path, new.encode())
    return found, changed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["record"]:
            parser = argparse.ArgumentParser(prog="doc_outputs record", description="Keep a built catalog of the "
                                             "shipped params.yaml as docs/outputs/catalog.json.")
            parser.add_argument("catalog", type=Path)
            parser.add_argument("--commit", required=True, help="the commit the farm built it at")
            args = parser.parse_args(argv[1:])
            catalog = json.loads(args.catalog.read_text())
            if stale := stale_cells(catalog, planned_shapes()):
                raise OutputsError(f"{args.catalog} is not a build of params.yaml's cells: " + "; ".join(stale))
            weights = "stress weights, not a trained checkpoint" if catalog.get("warning") else "trained weights"
            on = {**measured_on(f"python -m da3_litert_farm.dev.doc_outputs record {args.catalog} --commit "
                                f"{args.commit}", weights), "commit": args.commit,
                  "date": catalog["created"][:10]}
            fileio.write_json(RECORDED, {"measured_on": on, "catalog": catalog})
            print(f"recorded {RECORDED}: {len(catalog['models'])} cells, built at {args.commit}")
            return 0
        parser = argparse.ArgumentParser(description="Render the docs' marked outputs from the recorded catalog.")
        parser.add_argument("pages", nargs="+", type=Path)
        parser.add_argument("--check", action="store_true", help="write nothing; exit 1 where a block is stale")
        args = parser.parse_args(argv)
        found, changed = update(args.pages, check=args.check)
    except (OutputsError, OSError) as exc:
        print(f"doc_outputs: {exc}", file=sys.stderr)
        return 1
    verb = "stale" if args.check else "rewritten"
    print(f"{found} output blocks, {len(changed)} {verb}" + "".join(f"\n  {c}" for c in changed))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
