"""Figures in the docs come from JSON that the measuring command wrote, never typed by hand.

    python -m da3_litert_farm.dev.figures README.md docs/*.md          # rewrite the marked tables
    python -m da3_litert_farm.dev.figures --check README.md docs/*.md  # exit 1 if one is stale or bare
    python -m da3_litert_farm.dev.figures catalog artifacts/catalog.json --commit abc1234

A bench run with `--record NAME` writes docs/figures/NAME.json: the figures (a list of rows)
and where they were measured (date, CPU, commit, the command to rerun). A markdown file shows
them between `<!-- figures:NAME begin -->` and `<!-- figures:NAME end -->`; this command
rewrites exactly that text, so two places cannot show two different numbers. `--check` also
fails on a figure typed outside such a section (a number with s, MB, GMAC/s, ... or a 1 - r),
naming its file and line: measure it with a recording command, or remove it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import shlex
import sys
from pathlib import Path

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import fileio
from da3_litert_farm.core.git import GitError, git
from da3_litert_farm.core.host import cpu_name

REPO = Path(__file__).resolve().parents[2]
FIGURES = REPO / "docs" / "figures"
BEGIN = re.compile(r"<!-- figures:([A-Za-z0-9_-]+) begin -->")


class FiguresError(FarmError, ValueError):
    pass


def command_line(module: str, argv: list[str] | None = None) -> str:
    """The command a reader types to rerun `python -m module` with these arguments."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def git_commit() -> str:
    """The checkout's short commit, with -dirty when tracked files differ from it."""
    try:
        commit = git("rev-parse", "--short", "HEAD", cwd=REPO).strip()
        dirty = git("status", "--porcelain", "--untracked-files=no", cwd=REPO).strip()
    except GitError:  # no git, or not a checkout
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def measured_on(command: str, weights: str | None = None) -> dict:
    """Today (UTC), this machine's CPU, this checkout's commit, the command; and the model's
    weights where the figures depend on them."""
    on = {"date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "cpu": cpu_name(),
          "commit": git_commit()}
    return {**on, **({"weights": weights} if weights else {}), "command": command}


def record(name: str, figures: list[dict], command: str, *, weights: str | None = None,
           folder: Path = FIGURES, measured: dict | None = None) -> Path:
    """Write folder/NAME.json: the rows and where they were measured (`measured` overrides measured_on)."""
    if not BEGIN.fullmatch(f"<!-- figures:{name} begin -->"):
        raise FiguresError(f"figures name {name!r}: use letters, digits, '_' and '-' only")
    path = Path(folder) / f"{name}.json"
    fileio.write_json(path, {"measured_on": measured or measured_on(command, weights), "figures": figures})
    return path


def _cell(value, scientific: bool) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value == 0:
            return "0"
        if scientific or abs(value) < 0.01:  # two significant digits, short exponent
            mantissa, exponent = f"{value:.1e}".split("e")
            return f"{mantissa}e{int(exponent)}"
        return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"  # three significant digits
    return str(value).replace("|", "\\|")


def render(name: str, *, folder: Path = FIGURES) -> str:
    """The markdown for folder/NAME.json: a table of its rows, then where they were measured."""
    path = Path(folder) / f"{name}.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        how = ("python -m da3_litert_farm.dev.figures catalog artifacts/catalog.json --commit C" if name == "catalog"
               else f"the bench command with --record {name}")
        raise FiguresError(f"no {path}: record it first ({how})") from None
    rows, on = doc["figures"], doc["measured_on"]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    # Numbers under 0.01 are written 1.2e-3; so is a whole column of small numbers (errors, 1 - r)
    # with one of them under 0.01, so that its figures line up.
    def small_column(c: str) -> bool:
        numbers = [abs(r[c]) for r in rows if isinstance(r.get(c), float) and r[c] != 0]
        return bool(numbers) and max(numbers) < 1 and min(numbers) < 0.01

    scientific = {c: small_column(c) for c in columns}
    lines = ["| " + " | ".join(_cell(c, False) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c), scientific[c]) for c in columns) + " |" for row in rows]
    weights = f", {on['weights']}" if on.get("weights") else ""
    adapter = f", GPU check on {on['gpu adapter']}" if on.get("gpu adapter") else ""
    lines += ["", f"Measured {on['date']} on {on['cpu']}, commit {on['commit']}{weights}{adapter}: `{on['command']}`"]
    return "\n".join(lines)


def rewrite(text: str, where: str, *, folder: Path = FIGURES) -> tuple[str, list[str]]:
    """`text` with each marked section replaced by its render, and the names of those that changed."""
    return replace_sections(text, where, "figures", lambda name: render(name, folder=folder), FiguresError)


def replace_sections(text: str, where: str, kind: str, render_section, error: type[Exception]) -> tuple[str, list[str]]:
    """`text` with each `<!-- KIND:NAME begin -->` ... `<!-- KIND:NAME end -->` section's inside replaced by
    render_section(NAME), and the names of those that changed; an unpaired marker raises `error` naming `where`."""
    begin = re.compile(rf"<!-- {kind}:([A-Za-z0-9_-]+) begin -->")
    stray_end = re.compile(rf"<!-- {kind}:([A-Za-z0-9_-]+) end -->")
    out, changed, pos, ends_used = [], [], 0, set()
    while match := begin.search(text, pos):
        name = match.group(1)
        end_marker = f"<!-- {kind}:{name} end -->"
        end = text.find(end_marker, match.end())
        if end < 0:
            raise error(f"{where}: {match.group(0)} has no {end_marker} after it")
        try:
            body = "\n" + render_section(name) + "\n"
        except error as exc:
            raise error(f"{where}: {match.group(0)}: {exc}") from None
        if text[match.end():end] != body:
            changed.append(name)
        out += [text[pos:match.end()], body]
        ends_used.add(end)
        pos = end
    for stray in stray_end.finditer(text):
        if stray.start() not in ends_used:
            raise error(f"{where}: {stray.group(0)} has no <!-- {kind}:{stray.group(1)} begin --> before it")
    return "".join(out) + text[pos:], changed


def update(paths: list[Path | str], *, check: bool = False, folder: Path = FIGURES) -> tuple[int, list[str]]:
    """Rewrite the marked sections of each file (check: write nothing). Returns the number of
    sections found and the stale ones as 'FILE: figures:NAME'."""
    found, stale = 0, []
    for path in map(Path, paths):
        text = path.read_text()
        new, changed = rewrite(text, str(path), folder=folder)
        found += len(BEGIN.findall(text))
        stale += [f"{path}: figures:{name}" for name in changed]
        if changed and not check:
            fileio.write_bytes(path, new.encode())
    return found, stale


# A figure typed into prose: a number with a unit of time, size or arithmetic rate, or a
# fidelity figure (scientific notation, or "1 - r 0.0004").
_UNITS = r"(?:ms|s|min|minutes?|seconds?|hours?|KB|MB|MiB|GB|GiB|bytes|GMACs?(?:/s)?)"
BARE = re.compile(rf"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?{_UNITS}(?!\w)"
                  r"|(?<![\w.])\d(?:\.\d+)?e-\d+\b"
                  r"|\b1 - r\s+0\.\d+")
# Numbers that look like figures but are not measurements: each phrase is allowed where it
# occurs whole on one line, for the reason given. Keep this short; prefer rewording the page.
NOT_MEASURED = {
    "1e-4 of the depth range": "the patch stage's tolerance (model/patch.py MAX_RELATIVE_ERROR)",
    "+ 1 MB": "the bundle's sharing gate allows 1 MB of slack (checks/bundle.py)",
    "need 22 GB free": "the test suite's disk guard (tests/conftest.py BIG_BUILDS_FREE_GB)",
    "within 15 s": "the client's connect timeout (client/remote.py CONNECT_TIMEOUT_S)",
    "no answer ... in 45 s": "the client's answer timeout (client/remote.py ANSWER_TIMEOUT_S)",
    "wait 30 min": "DVC's own default timeout, which the client replaces",
    "waits at most 120 s": "LiteRT's read timeout, a constant of the runtime (gpu/gpu_runtime.py)",
    "is 1 - r 4e-4": "an example of the notation (0.9996 written as 1 - r)",
    "within 1 - r 1e-5 of the official model": "the FP16 goal this project set, not a measurement",
}


def bare_figures(paths: list[Path | str], allowed: dict[str, str] = NOT_MEASURED) -> list[str]:
    """Every figure-like token of these markdown files that a rendered `figures:` section does not
    hold, as 'FILE:LINE: TOKEN'. Fenced code blocks are skipped (commands and their output), and
    so is a token inside a phrase of `allowed`."""
    found = []
    for path in map(Path, paths):
        fenced, section = False, None
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
                continue
            if section:
                section = None if f"<!-- figures:{section} end -->" in line else section
                continue
            if begin := BEGIN.search(line):
                section = begin.group(1)
                continue
            if fenced:
                continue
            spans = [(m.start(), m.end()) for phrase in allowed for m in re.finditer(re.escape(phrase), line)]
            for match in BARE.finditer(line):
                if not any(start <= match.start() and match.end() <= end for start, end in spans):
                    found.append(f"{path}:{number}: {match.group(0)}")
    return found


def catalog_rows(catalog: dict, cost: bool = False) -> list[dict]:
    """One row per cell of a farm's catalog (size, CPU and GPU fidelity), and one per bundle; with `cost`,
    what each file costs (its preset, GMAC, CPU ms, GPU seconds per inference, its export's seconds and peak RSS)."""
    rows = []
    for m in catalog["models"]:
        gpu, fid = m["gpu"], m["fidelity"]
        costs = {}
        if cost:
            c = m["cost"]
            costs = {"model": m["output"]["model"], "GMAC": m["gpu_lint"]["gmac"], "CPU ms": c["cpu_ms"],
                     "GPU s": c.get("gpu_seconds", "skipped"), "export s": c["export_seconds"],
                     "export peak RSS MiB": c["export_peak_rss_mib"]}
        rows.append({
            "cell": m["cell"], "H x W": f"{m['height']} x {m['width']}", "MB": m["bytes"] / 1e6, **costs,
            "CPU 1 - r": 1 - fid["pearson_min"], "CPU mean rel": fid["mean_rel_error_max"],
            "GPU 1 - r": 1 - gpu["pearson_min"] if gpu["checked"] else "skipped",
            "GPU mean rel": gpu["mean_rel_max"] if gpu["checked"] else "skipped",
            **({} if cost else {"GPU adapter": gpu["adapter"] if gpu["checked"] else "skipped"}),
        })
    sizes = {m["cell"]: m["bytes"] for m in catalog["models"]}
    for bundle in catalog.get("bundles", []):
        largest = max(sizes[s["cell"]] for s in bundle["signatures"])
        rows.append({"cell": f"bundle {bundle['bundle']}", "H x W": f"all {len(bundle['signatures'])}",
                     "MB": bundle["bytes"] / 1e6, "x of the single files": bundle["bytes"] / bundle["singles_bytes"],
                     **({"x the largest file": bundle["bytes"] / largest} if cost else {})})
    return rows


def bundle_load_rows(catalog: dict) -> list[dict]:
    """What loading each of the catalog's bundles cost, per runtime, as its bundle stage measured it: every
    signature, only one (LiteRT's C API), and that signature's own file."""
    rows = []
    for bundle in catalog.get("bundles", []):
        for runtime, costs in bundle["load"].items():
            single = costs["single"]
            for which, label in (("bundle", "bundle, every signature"), ("bundle_one_signature", "bundle, only {}"),
                                 ("single", "{}'s own file")):
                if which in costs:
                    c = costs[which]
                    rows.append({"bundle": bundle["bundle"], "runtime": runtime.upper(),
                                 "load": label.format(c.get("signature") or single["cell"]),
                                 "seconds": c["seconds"], "peak growth MiB": c["peak_growth_mib"],
                                 "x the file's memory": c["peak_growth_mib"] / single["peak_growth_mib"]})
    return rows


def weights_name(checkpoint: dict) -> str:
    """Which weights a catalog was built from, in a few words (its fidelity figures depend on them)."""
    if checkpoint["source"] == "random":
        outliers = ", outlier channels" if checkpoint.get("outliers") else ""
        return f"stress weights (seed {checkpoint['seed']}{outliers}), not a trained checkpoint"
    if checkpoint["source"] == "hub":
        return f"weights {checkpoint['repo']} at {checkpoint['resolved_revision'] or checkpoint['revision']}"
    return f"weights from a local checkpoint, sha256 {checkpoint['weights_sha256'][:12]}"


def catalog_weights(catalog: dict) -> str:
    """Which weights each model of a catalog was built from."""
    names = {model: weights_name(s["checkpoint"]) for model, s in catalog["sources"].items()}
    if len(set(names.values())) == 1:  # one kind for all, said once
        return next(iter(names.values())) + (f" (models {', '.join(names)})" if len(names) > 1 else "")
    return "; ".join(f"{model}: {name}" for model, name in names.items())


def record_catalog(path: Path, commit: str, command: str, *, folder: Path = FIGURES, name: str = "catalog",
                   cost: bool = False) -> Path:
    catalog = json.loads(Path(path).read_text())
    measured = {"date": catalog["created"][:10], "cpu": cpu_name(), "commit": commit,
                "weights": catalog_weights(catalog), "command": command}
    if cost:  # one adapter for the whole table, said once
        adapters = {m["gpu"]["adapter"] for m in catalog["models"] if m["gpu"]["checked"]}
        measured["gpu adapter"] = ", ".join(sorted(adapters)) or "none: GPU check skipped"
    if cost and any(b.get("load") for b in catalog.get("bundles", [])):
        record(f"{name}-load", bundle_load_rows(catalog), command, folder=folder, measured=measured)
    return record(name, catalog_rows(catalog, cost), command, folder=folder, measured=measured)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    module = "da3_litert_farm.dev.figures"
    if argv[:1] == ["catalog"]:
        parser = argparse.ArgumentParser(
            prog=f"python -m {module} catalog",
            description="Record a farm's catalog as docs/figures/catalog.json (or NAME.json). Run it on the machine that "
                        "built the catalog: the CPU it names is this machine's; the date is the catalog's.")
        parser.add_argument("catalog", type=Path, help="the farm's artifacts/catalog.json")
        parser.add_argument("--commit", required=True, help="the farm checkout's commit that built it")
        parser.add_argument("--record", default="catalog", metavar="NAME",
                            help="write docs/figures/NAME.json (default: %(default)s)")
        parser.add_argument("--cost", action="store_true",
                            help="add what each file costs: preset, GMAC, CPU ms, GPU s, export s and peak RSS; and "
                                 "write NAME-load.json, what loading the bundle cost")
        args = parser.parse_args(argv[1:])
        path = record_catalog(args.catalog, args.commit, command_line(module, argv), name=args.record,
                              cost=args.cost)
        print(f"figures: wrote {path}")
        return 0
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a section is stale or a figure is typed outside one")
    parser.add_argument("--figures-dir", type=Path, default=FIGURES, help="where the JSON files are (default: %(default)s)")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    try:
        found, stale = update(args.files, check=args.check, folder=args.figures_dir)
    except FiguresError as exc:
        print(f"figures: {exc}", file=sys.stderr)
        return 2
    bare = bare_figures(args.files) if args.check else []
    for where in bare:
        print(f"figures: bare figure (render it from a recorded JSON, or remove it): {where}", file=sys.stderr)
    if args.check and stale:
        for section in stale:
            print(f"figures: stale: {section}", file=sys.stderr)
        print(f"figures: rerun without --check: python -m {module} {shlex.join(map(str, args.files))}",
              file=sys.stderr)
        return 1
    if bare:
        return 1
    files = f"{len(args.files)} file{'s' * (len(args.files) != 1)}"
    if stale:
        print(f"figures: rewrote {len(stale)} of {found} sections in {files}")
    else:
        print(f"figures: {found} sections in {files}, all up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
