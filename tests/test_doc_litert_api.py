"""The docs' Kotlin and Swift snippets against LiteRT's public API, by name: every LiteRT type, nested type, enum entry,
member and named argument (Kotlin `precision = ...`, Swift labels) a snippet reaches is one LiteRT declares.

Nothing here compiles Kotlin or Swift, and LiteRT's sources are not reachable from a test, so the names come from
tests/data/litert-api.json, read from LiteRT's sources by `python -m da3_litert_farm.dev.litert_api GIT_DIR` (it
records the commit). A snippet's value is followed only where its type is known: a LiteRT constructor or factory, a
page function declared to return a LiteRT type, a parameter declared with one, an element of a list of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tests.doc_blocks import REPO, fenced_blocks
from tests.test_doc_examples import closing, code_only, split_top
from tests.test_docs import pages

TABLE = REPO / "tests" / "data" / "litert-api.json"
LANGS = ("kotlin", "swift")
IMPORT = {"kotlin": re.compile(r"^\s*import\s+com\.google\.ai\.edge\.litert\.(\w+)", re.M),
          "swift": re.compile(r"^\s*import\s+LiteRT\b", re.M)}
FUNCTION = {"kotlin": re.compile(r"\bfun\s+(?:<[^>]*>\s*)?(\w+)\s*\("),
            "swift": re.compile(r"\bfunc\s+(\w+)\s*(?:<[^>]*>)?\s*\(")}
BINDING = re.compile(r"\b(?:val|var|let)\s+(\w+)\s*(?::\s*([^=\n]+?))?\s*=\s*(?:try[!?]?\s+)?")
FOR_LOOP = re.compile(r"\bfor\s*\(?\s*(\w+)\s+in\s+(\w+)")
CHAIN_START = re.compile(r"(?<![\w.$])([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Value:
    """What a snippet's expression is: a LiteRT type itself (`CompiledModel.GpuOptions`), or a value of a type
    written as LiteRT writes it (`List<TensorBuffer>`, `[TensorBuffer]`, `() -> CompiledModel`, `CompiledModel?`)."""
    type: str
    is_type: bool = False


def element(type_: str) -> str | None:
    found = re.fullmatch(r"(?:List|Set|Array|MutableList)<(.+)>|\[(.+)\]", type_.strip().rstrip("?"))
    return (found[1] or found[2]).strip() if found else None


def returned(type_: str) -> str | None:
    found = re.fullmatch(r"\(\s*\)\s*(?:throws\s*)?->\s*(.+)", type_.strip())
    return found[1].strip() if found else None


class Api:
    def __init__(self, table: dict, lang: str):
        self.lang, self.types, self.commit = lang, table[lang], table["source"]["commit"][:12]

    def qualified(self, name: str, scope: str | None = None) -> str | None:
        """The table's name for `name` written inside `scope` (a nested type may be named from its outer type)."""
        name = name.strip().rstrip("?")
        while scope:
            if f"{scope}.{name}" in self.types:
                return f"{scope}.{name}"
            scope = scope.rpartition(".")[0]
        return name if name in self.types else None

    def lookup(self, type_: str, member: str) -> tuple[str, str] | None:
        """(declared type, owner) of `member` on `type_` or a supertype the table holds."""
        seen, todo = set(), [type_]
        while todo:
            name = todo.pop()
            entry = self.types.get(name)
            if entry is None or name in seen:
                continue
            seen.add(name)
            if member in entry.get("members", {}):
                return entry["members"][member], name
            todo += [q for s in entry.get("supertypes", []) if (q := self.qualified(s, name))]
        return None

    def known(self, type_: str) -> list[str]:
        entry = self.types[type_]
        return sorted({*entry.get("cases", []), *entry.get("members", {})})


def labels(lang: str, args: list[str]) -> list[str]:
    """The names (Kotlin `name = value`) or labels (Swift `label: value`, `_` for none) the arguments are passed by;
    Kotlin's positional arguments are left out."""
    out = []
    for arg in args:
        found = re.match(r"(\w+)\s*=(?!=)" if lang == "kotlin" else r"(\w+)\s*:(?!:)", arg)
        if found or lang == "swift":
            out.append(found[1] if found else "_")
    return out


def fits(lang: str, passed: list[str], overloads: list[list[str]]) -> bool:
    """Whether some overload takes the arguments' names: Kotlin's in any order, Swift's labels in order (a
    parameter with a default may be left out: the table does not say which have one)."""
    for params in overloads:
        if lang == "kotlin" and set(passed) <= set(params):
            return True
        rest = iter(params)
        if lang == "swift" and all(label in rest for label in passed):
            return True
    return False


class Page:
    """One page's snippets in one language, followed statement by statement."""

    def __init__(self, page: Path, lang: str, api: Api):
        self.page, self.lang, self.api = page, lang, api
        self.blocks = [(b, code_only("\n".join(b.body))) for b in fenced_blocks(page) if b.lang == lang]
        text = "\n".join(t for _, t in self.blocks)
        imported = IMPORT[lang].findall(text)
        # Kotlin: the names a page imports from LiteRT, or all of them where a page's snippets import nothing (a
        # fragment of an app); Swift: `import LiteRT` brings every public type
        every = {name for name in api.types if "." not in name}
        self.names = (set(imported) or every) if lang == "kotlin" else every if imported else set()
        self.values: dict[str, Value] = {}
        self.functions: dict[str, str] = {}  # the page's own functions -> their declared return type
        self.problems: list[str] = []
        self.checked = 0

    def type_of(self, written: str) -> Value | None:
        """A declared type (`CompiledModel`, `List<() -> CompiledModel>`) when it is, or holds, a LiteRT type."""
        names = re.findall(r"\w+", written)
        return Value(written.strip()) if any(self.api.qualified(n) and n in self.names for n in names) else None

    def scan(self) -> None:
        for block, text in self.blocks:
            for match in FUNCTION[self.lang].finditer(text):
                close = closing(text, match.end() - 1)
                for param in split_top(text[match.end():close]):
                    name, _, written = param.partition(":")
                    if (value := self.type_of(written.split("=")[0])) is not None:
                        self.values[name.split()[-1]] = value
                result = re.match(r"\s*(?:throws\s*)?(?:->|:)\s*([\w.<>?\[\] ]+?)\s*(?:=|\{|$)", text[close + 1:],
                                  re.M)
                if result:
                    self.functions[match[1]] = result[1]
            for match in CHAIN_START.finditer(text):
                if loop := FOR_LOOP.match(text, match.start()):  # `for (x in xs)`: x is an element of xs
                    items = self.values.get(loop[2])
                    if items is not None and (inner := element(items.type)) is not None:
                        self.values[loop[1]] = Value(inner)
                    continue
                line = block.line + 1 + text[:match.start()].count("\n")
                value = self.chain(text, match.start(), line)
                bound = self.binding_at(text, match.start())
                if bound is not None and value is not None:
                    self.values[bound] = value

    def binding_at(self, text: str, start: int) -> str | None:
        """The name a `val|var|let NAME [: T] = ` right before `start` binds."""
        before = text[max(0, start - 200):start]
        found = list(BINDING.finditer(before))
        return found[-1][1] if found and found[-1].end() == len(before) else None

    def chain(self, text: str, start: int, line: int) -> Value | None:
        """Follows `head(.member | (args) | [i])*` from `start`, checking each step against the table; the value
        it ends with, where known."""
        head = CHAIN_START.match(text, start)[1]
        position = start + len(head)
        if head in self.values:
            value = self.values[head]
        elif head in self.names and (q := self.api.qualified(head)):
            value = Value(q, is_type=True)
        elif head in self.functions and text[position:position + 1] == "(":
            written = self.functions[head]
            value = self.type_of(written)
            position = closing(text, position) + 1
            if value is None:
                return None
        else:
            return None
        while True:
            step = re.match(r"\s*(?:\?\.|!!\.|\.)\s*(\w+)|(\()|(\[)", text[position:])
            if not step:
                return value
            if step[2] or step[3]:
                open_at = position + step.start(2 if step[2] else 3)
                end = closing(text, open_at)
                args = split_top(text[open_at + 1:end])
                position = end + 1
                if step[3]:
                    inner = element(value.type)
                    if inner is None:
                        return None
                    value = Value(inner)
                elif value.is_type:  # a constructor
                    self.checked += 1
                    ctors = self.api.types[value.type].get("constructors", [])
                    if not fits(self.lang, labels(self.lang, args), ctors):
                        self.report(line, f"{value.type}({', '.join(args)})", "takes no such arguments: its "
                                    "constructors take " + " or ".join(f"({', '.join(c)})" for c in ctors))
                    value = Value(value.type)
                elif (result := returned(value.type)) is not None:
                    value = Value(result)
                else:
                    return None
                continue
            member = step[1]
            position += step.end()
            owner_type = value.type.rstrip("?")
            if self.api.qualified(owner_type) is None:
                return None  # a type the table does not hold (a platform type, a list): not LiteRT's to check
            owner_type = self.api.qualified(owner_type)
            entry = self.api.types[owner_type]
            self.checked += 1
            nested = f"{owner_type}.{member}"
            if value.is_type and nested in self.api.types:
                value = Value(nested, is_type=True)
            elif value.is_type and member in entry.get("cases", []):
                value = Value(owner_type)
            elif (found := self.api.lookup(owner_type, member)) is not None:
                declared, owner = found
                if text[position:position + 1] == "(":
                    open_at = position
                    end = closing(text, open_at)
                    passed = labels(self.lang, split_top(text[open_at + 1:end]))
                    overloads = self.api.types[owner].get("calls", {}).get(member, [[]])
                    if not fits(self.lang, passed, overloads):
                        self.report(line, f"{owner_type}.{member}({', '.join(passed)})", "takes no such arguments: "
                                    + " or ".join(f"({', '.join(o)})" for o in overloads))
                    position = end + 1
                inner = self.api.qualified(declared, owner) if declared else None
                value = Value(inner or declared) if declared else None
                if value is None:
                    return None
            else:
                self.report(line, f"{owner_type}.{member}", f"{owner_type} has no {member} (it has: "
                            f"{', '.join(self.api.known(owner_type))})")
                return None

    def report(self, line: int, what: str, why: str) -> None:
        """A use the table does not hold, with the page's line and the LiteRT commit it was checked against."""
        self.problems.append(f"{self.page}:{line}: {what}: {why}; LiteRT {self.api.commit}'s {self.lang} API "
                             f"({TABLE.relative_to(REPO)})")


def api_problems(page: Path, table: dict) -> tuple[list[str], int]:
    """Each use of LiteRT's API on `page` that the table does not hold; and how many uses were checked."""
    problems, checked = [], 0
    for lang in LANGS:
        reader = Page(page, lang, Api(table, lang))
        reader.scan()
        problems += reader.problems
        checked += reader.checked
    return problems, checked


def test_every_snippet_uses_litert_by_the_names_litert_declares(capsys):
    table = json.loads(TABLE.read_text())
    checked = {page: api_problems(page, table) for page in pages()}
    problems = [p for found, _ in checked.values() for p in found]
    assert not problems, "\n".join(problems)
    by_page = {page.name: n for page, (_, n) in checked.items() if n}
    # the reader follows the snippets that use LiteRT: the Android, iOS and bundle pages, and the README's one line
    assert set(by_page) == {"README.md", "android.md", "ios.md", "bundle.md"}, by_page
    with capsys.disabled():
        print(f"\n{sum(by_page.values())} uses of LiteRT's API checked against LiteRT "
              f"{table['source']['commit'][:12]} ({table['source']['date']}): {by_page}")


def test_a_name_litert_does_not_have_is_reported_with_page_line_and_what_it_has(tmp_path):
    """Drift planted in copies of the real pages: an enum entry, a member, a named argument, a Swift label."""
    table = json.loads(TABLE.read_text())
    android = (REPO / "docs" / "android.md").read_text()
    ios = (REPO / "docs" / "ios.md").read_text()
    plants = [(android, "Precision.FP16_WITH_FP32_ACCUM)", "Precision.FP16_FP32_ACCUM)"),
              (android, "inputs[0].writeFloat(cameraInput", "inputs[0].writeFloats(cameraInput"),
              (android, "CompiledModel.GpuOptions(\n                precision =",
               "CompiledModel.GpuOptions(\n                precisionMode ="),
              (ios, "CompiledModel(filePath: path, environment: environment, options: gpu)",
               "CompiledModel(path: path, environment: environment, options: gpu)")]
    for text, old, _ in plants:
        assert text.count(old) >= 1, f"the page no longer has {old!r}: plant elsewhere"
    for text, old, new in plants:
        page = tmp_path / ("android.md" if text is android else "ios.md")
        page.write_text(text.replace(old, new, 1))
        problems, _ = api_problems(page, table)
        line = text[:text.index(old)].count("\n") + 1  # each plant's chain starts on its first line
        assert len(problems) == 1, problems
        assert problems[0].startswith(f"{page}:{line}: "), problems
        if "FP16_FP32" in new:
            assert "CompiledModel.GpuOptions.Precision has no FP16_FP32_ACCUM (it has: DEFAULT, FP16, " \
                   "FP16_WITH_FP32_ACCUM, FP32, value)" in problems[0], problems
        elif "writeFloats" in new:
            assert "TensorBuffer has no writeFloats" in problems[0] and "writeFloat," in problems[0], problems
        elif "precisionMode" in new:
            assert "CompiledModel.GpuOptions(precisionMode = " in problems[0] and \
                   "constructors take (constantTensorSharing," in problems[0], problems
        else:
            assert "CompiledModel(path: path, environment: environment, options: gpu): takes no such arguments: its " \
                   "constructors take (filePath, environment, options)" in problems[0], problems
        page.unlink()
