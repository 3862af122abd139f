"""The README and docs/: no figure typed outside a rendered section, every relative link resolves, every
make target named."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from da3_litert_farm.dev import figures

REPO = Path(__file__).resolve().parents[1]


def pages(root: Path = REPO) -> list[Path]:
    found = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    assert found[0].is_file() and len(found) >= 5, found  # the README and the pages in docs/
    return found


def test_every_figure_in_the_docs_is_rendered_from_a_recorded_json():
    bare = figures.bare_figures(pages())
    assert not bare, ("figures typed by hand (render them from docs/figures/NAME.json, which says date, CPU and "
                      "commit, or remove them):\n" + "\n".join(bare))


def test_a_planted_bare_figure_is_reported_with_its_file_and_line(tmp_path, capsys):
    copy = tmp_path / "repo"
    (copy / "docs").mkdir(parents=True)
    for page in pages():
        shutil.copy(page, copy / page.relative_to(REPO))
    shutil.copytree(REPO / "docs" / "figures", copy / "docs" / "figures")
    target = copy / "docs" / "bundle.md"
    lines = target.read_text().splitlines()
    lines[2:2] = ["The merge took 12.3 s and 1 - r reached 6.1e-4 on lavapipe.",
                  "```", "took 12.3 s  # a command's output in a fenced block is not prose", "```",
                  "<!-- figures:bench-gpu begin -->", "| inference | 99.9 s |", "<!-- figures:bench-gpu end -->",
                  "The bundle stage's sharing gate allows + 1 MB of slack."]
    target.write_text("\n".join(lines) + "\n")

    assert figures.bare_figures(pages(copy)) == [f"{target}:3: 12.3 s", f"{target}:3: 6.1e-4"]
    assert figures.main(["--check", "--figures-dir", str(copy / "docs" / "figures"), *map(str, pages(copy))]) == 1
    err = capsys.readouterr().err
    assert f"{target}:3: 12.3 s" in err and f"{target}:3: 6.1e-4" in err
    assert "12.3 s" not in err.replace(f"{target}:3: 12.3 s", "")  # the fenced line is not reported


def test_the_bare_figure_pattern_finds_units_rates_and_fidelity():
    def tokens(text):
        return [m.group(0) for m in figures.BARE.finditer(text)]

    assert tokens("took 20 min 10 s, 1.46 GMAC/s, 2.4 GB, +165 MiB, 799,744 bytes, 0.7s") == \
        ["20 min", "10 s", "1.46 GMAC/s", "2.4 GB", "165 MiB", "799,744 bytes", "0.7s"]
    assert tokens("1 - r 5.9e-4 and 1e-5, 1 - r 0.0004") == ["5.9e-4", "1e-5", "1 - r 0.0004"]
    # not figures: counts of things, shapes, versions, multiples
    assert tokens("5 stages, 896 x 504, 896x504, Python 3.11, 14x, 9:16, 1,555 operators, 2 cores") == []


def test_every_allowed_phrase_is_still_used():
    text = "\n".join(page.read_text() for page in pages())
    unused = [phrase for phrase in figures.NOT_MEASURED if phrase not in text]
    assert not unused, f"figures.NOT_MEASURED lists phrases no page has any more: {unused}"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())  # a link's text only
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, seen, fenced = set(), {}, False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.+)", line)):
            base = slug(heading.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(page: Path) -> list[tuple[int, str]]:
    links, fenced = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`(?!\])", "", line)):
            target = match.group(1)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked here
                links.append((number, target))
    return links


def broken_links(page: Path) -> list[str]:
    broken = []
    for number, target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page}:{number}: {target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{page}:{number}: {target}: {file.name} has no heading #{anchor}")
    return broken


def test_every_relative_link_in_the_docs_resolves():
    assert sum(len(relative_links(page)) for page in pages()) > 50  # the parser finds the docs' links
    broken = [b for page in pages() for b in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_a_broken_link_and_a_missing_anchor_are_reported(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## What `gpu@A` checks\n\n## 1 - r\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#what-gpua-checks) [ok](other.md#1---r) [`code`](other.md)\n"
                    "[gone](missing.md) [no anchor](other.md#nowhere) [web](https://example.com/x)\n"
                    "```\n[in a fence](missing.md)\n```\n")
    assert broken_links(page) == [f"{page}:2: missing.md: no such file",
                                  f"{page}:2: other.md#nowhere: other.md has no heading #nowhere"]


def test_the_readme_names_every_make_target_and_no_other():
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    assert {"farm", "test", "publish"} <= targets, targets
    readme = (REPO / "README.md").read_text()
    named = set(re.findall(r"(?:`|^)make ([a-z][\w-]*)", readme, re.M))
    assert not targets - named, f"README.md never shows `make TARGET` for: {sorted(targets - named)}"
    assert not named - targets, f"README.md names targets the Makefile lacks: {sorted(named - targets)}"


def test_make_help_lists_every_phony_target_with_its_description():
    makefile = (REPO / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.M).group(1).split()
    described = dict(re.findall(r"^([a-z][\w-]*):[^#\n]*## (.+)$", makefile, re.M))
    assert set(phony) == set(described), "each .PHONY target needs a `## description` on its line, and only they"
    shown = subprocess.run(["make", "-s", "-C", str(REPO), "help"], capture_output=True, text=True, check=True).stdout
    assert sorted(shown.splitlines()) == sorted(f"make {t:<14} {described[t]}" for t in phony)
    assert re.search(r"^\.DEFAULT_GOAL := \.venv/\.installed$",  # plain `make` still builds only the venv
                     subprocess.run(["make", "-pq", "-C", str(REPO)], capture_output=True, text=True).stdout, re.M)


def test_the_readme_stays_a_front_door():
    """What it is, how to use it and its limits on a few screens; the rest is linked (docs/README.md)."""
    size = len((REPO / "README.md").read_bytes())
    assert size <= 12 * 1024, f"README.md is {size} bytes, over 12 KiB: move detail to a page under docs/ and link it"


def test_the_readmes_disk_guard_is_the_suites():
    """The free space the README tells a newcomer `make test` needs is the one the suite checks before it starts."""
    from tests.conftest import BIG_BUILDS_FREE_GB
    assert f"need {BIG_BUILDS_FREE_GB} GB free in `TMPDIR`" in (REPO / "README.md").read_text()
