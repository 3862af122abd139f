"""LiteRT's public Kotlin and Swift API, as names: the table tests/test_doc_litert_api.py checks the docs' snippets
against (nothing here compiles Kotlin or Swift, and LiteRT's sources are not reachable from a test).

    python -m da3_litert_farm.dev.litert_api GIT_DIR [--out tests/data/litert-api.json]

GIT_DIR is a clone of github.com/google-ai-edge/LiteRT (bare or not): its HEAD's Kotlin API
(litert/kotlin/src/main/kotlin/com/google/ai/edge/litert/) and Swift API (litert/swift/Sources/) are read. Per public
type (nested ones as `CompiledModel.GpuOptions`): its members with their declared types, its constructors'
parameter names (Swift: labels), its enum cases and its supertypes. The table records the commit it was read at.

A reader, not a compiler: declarations are found by pattern in the comment-free text, and their owner by brace depth.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = "google-ai-edge/LiteRT"
SOURCES = {"kotlin": ("litert/kotlin/src/main/kotlin/com/google/ai/edge/litert/", ".kt"),
           "swift": ("litert/swift/Sources/", ".swift")}
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "litert-api.json"
KOTLIN_HIDDEN = {"private", "internal", "protected"}  # Kotlin is public by default; Swift only `public` / `open`

TYPE_HEAD = re.compile(r"\b(?:(?P<enum>enum)\s+(?:class\s+)?"
                       r"|(?P<kind>class|object|interface|struct|extension|protocol)\s+)(?P<name>\w+)")
MEMBER_HEAD = re.compile(r"\b(?P<kind>fun|func|val|var|let|init|constructor|case)\b")


@dataclass
class ApiType:
    members: dict[str, str] = field(default_factory=dict)  # name -> declared type ("" where none is written)
    calls: dict[str, list[list[str]]] = field(default_factory=dict)  # function -> each overload's parameter names
    constructors: list[list[str]] = field(default_factory=list)  # each constructor's parameter names (Swift: labels)
    cases: list[str] = field(default_factory=list)  # enum entries
    supertypes: list[str] = field(default_factory=list)


def strip_comments(text: str) -> str:
    """The text with comments blanked (newlines kept) and string contents emptied: braces inside either are not code."""
    out, i, n = [], 0, len(text)
    while i < n:
        two = text[i:i + 2]
        if two == "//":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif two == "/*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def closing(text: str, start: int, open_: str, close: str) -> int:
    """The index just past the bracket that closes the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        depth += (text[i] == open_) - (text[i] == close)
        if depth == 0:
            return i + 1
    return len(text)


def split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([{<") - (ch in ")]}>")
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def parameter_names(params: str, lang: str) -> list[str]:
    """Each parameter's name as a caller writes it: Kotlin's name (for `name = value`), Swift's argument label
    (`_` for none)."""
    names = []
    for param in split_top(params):
        param = re.sub(r"@\w+(\([^)]*\))?\s*", "", param.split("=")[0]).split(":")[0].split()
        words = [word for word in param if word not in {"vararg", "val", "var", "private", "internal", "inout",
                                                         "override", "noinline", "crossinline"}]
        if words:
            names.append(words[0])
    return names


def modifiers_before(text: str, start: int) -> set[str]:
    """The words on the declaration's line before `start` (its modifiers and annotations)."""
    line = text[text.rfind("\n", 0, start) + 1:start]
    return set(re.findall(r"[@\w]+", line))


def visible(text: str, start: int, lang: str) -> bool:
    mods = modifiers_before(text, start)
    if lang == "swift":
        return bool(mods & {"public", "open"})
    return not mods & KOTLIN_HIDDEN


def read_types(text: str, lang: str, types: dict[str, ApiType]) -> None:
    """Adds the public types and members declared in one source file's text to `types`."""
    code = strip_comments(text)
    depth = [0] * (len(code) + 1)  # brace depth before each index
    parens = [0] * (len(code) + 1)  # and parenthesis depth: a nested class's `val` parameters are not members
    for i, ch in enumerate(code):
        depth[i + 1] = depth[i] + (ch == "{") - (ch == "}")
        parens[i + 1] = parens[i] + (ch == "(") - (ch == ")")
    scopes: list[tuple[int, int, str | None, str]] = []  # (body start, body end, qualified name or None, kind)
    primary: set[int] = set()  # where each Kotlin primary constructor's parameters open
    for match in TYPE_HEAD.finditer(code):
        name, kind = match["name"], match["kind"] or "enum"
        brace, paren = code.find("{", match.end()), code.find("(", match.end())
        owner = owner_scope(scopes, match.start(), depth)
        if kind == "object" and name == "object":  # `companion object`: its members are the class's
            continue
        hidden = (lang == "kotlin" and not visible(code, match.start(), lang)) or \
                 (lang == "swift" and kind != "extension" and not visible(code, match.start(), lang))
        qualified = None if hidden or (owner is not None and owner[2] is None) else \
            (name if kind == "extension" or owner is None else f"{owner[2]}.{name}")
        head_end = brace if brace >= 0 else len(code)
        if qualified is not None:
            api = types.setdefault(qualified, ApiType())
            head = code[match.end():head_end]
            between = code[match.end():paren]
            if lang == "kotlin" and 0 <= paren < head_end and re.fullmatch(r"[\s@\w]*", between):
                primary.add(paren)  # the primary constructor: `class Name [@Ann] [private] [constructor](...)`
                close = closing(code, paren, "(", ")")
                if not KOTLIN_HIDDEN & set(between.split()):
                    api.constructors.append(parameter_names(code[paren + 1:close - 1], lang))
                for param in split_top(code[paren + 1:close - 1]):
                    if re.match(r"(@\w+\s+)*(val|var)\s", param) and not re.search(r"\b(private|internal)\b", param):
                        pname, _, ptype = re.sub(r"^(@\w+\s+)*(val|var)\s+", "", param).partition(":")
                        api.members[pname.strip()] = ptype.split("=")[0].strip()
                head = code[close:head_end]
            supers = head.split(":", 1)[1] if ":" in head else ""
            api.supertypes += [re.match(r"\s*(\w+)", s)[1] for s in split_top(supers.split("where")[0])
                               if re.match(r"\s*(\w+)", s)]
            if owner is not None and owner[2] is not None and kind != "extension":
                types[owner[2]].members[name] = name
        if brace >= 0:
            scopes.append((brace + 1, closing(code, brace, "{", "}"), qualified, kind))
    for start, end, qualified, kind in scopes:
        if qualified is None:
            continue
        api = types[qualified]
        if kind == "enum" and lang == "kotlin":
            entries = code[start:end - 1].split(";")[0]
            api.cases += [m[1] for m in re.finditer(r"(?:^|,)\s*([A-Z][A-Z0-9_]*)\s*(?:\([^)]*\))?", entries)]
        for match in MEMBER_HEAD.finditer(code, start, end - 1):
            direct = depth[match.start()] == depth[start] or in_companion(match.start(), start, depth, code)
            if parens[match.start()] != parens[start] or not direct:
                continue
            add_member(code, match, lang, api, primary)


def owner_scope(scopes, position: int, depth: list[int]):
    """The innermost type whose body holds `position` directly (not inside one of its functions)."""
    inner = [s for s in scopes if s[0] <= position < s[1]]
    if not inner:
        return None
    best = max(inner, key=lambda s: s[0])
    return best if depth[position] == depth[best[0]] else (best[0], best[1], None, best[3])


def in_companion(position: int, start: int, depth: list[int], code: str) -> bool:
    """Whether `position` sits directly in a `companion object` directly in the type whose body starts at `start`."""
    if depth[position] != depth[start] + 1:
        return False
    body = code.rfind("{", start, position)
    while body >= start and depth[body] != depth[start]:
        body = code.rfind("{", start, body)
    return body >= start and re.search(r"companion\s+object(\s+\w+)?\s*$", code[start:body]) is not None


def add_member(code: str, match: re.Match, lang: str, api: ApiType, primary: set[int]) -> None:
    kind = match["kind"]
    rest = code[match.end():]
    if kind == "constructor" and match.end() + rest.find("(") in primary:
        return
    if not visible(code, match.start(), lang) and not (kind == "case" and lang == "swift"):
        return
    if kind == "case" and lang == "swift":
        line = rest.split("\n", 1)[0]
        api.cases += [re.match(r"\s*(\w+)", c)[1] for c in split_top(line) if re.match(r"\s*(\w+)", c)]
        return
    if kind == "init" and lang == "kotlin":  # an initializer block, not a constructor
        return
    if kind in {"init", "constructor"}:
        paren = match.end() + rest.find("(")
        api.constructors.append(parameter_names(code[paren + 1:closing(code, paren, "(", ")") - 1], lang))
        return
    if kind in {"fun", "func"}:
        found = re.match(r"\s*(?:<[^>]*>\s*)?(?:[\w.<>?]+\.)?(\w+)\s*(?:<[^>]*>)?\s*\(", rest)
        if not found:
            return
        paren = match.end() + found.end() - 1
        close = closing(code, paren, "(", ")")
        after = code[close:code.find("\n", close)]
        returns = re.match(r"\s*(?:throws\s*)?(?:->|:)\s*([\w.<>?\[\], ]+?)\s*(?:\{|=|$|where)", after)
        api.calls.setdefault(found[1], []).append(parameter_names(code[paren + 1:close - 1], lang))
        api.members[found[1]] = returns[1].strip() if returns else ""
        return
    found = re.match(r"\s*(\w+)\s*(?::\s*([\w.<>?\[\], ]+?))?\s*(?:=|\{|$|\n|get\b|by\b)", rest)
    if found:
        api.members[found[1]] = (found[2] or "").strip()


def read_api(git_dir: Path) -> dict:
    """The table for the LiteRT clone at `git_dir` (its HEAD)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True,
                              text=True).stdout

    commit, date = git("log", "-1", "--format=%H %cs", "HEAD").split()
    table: dict = {"source": {"repo": REPO, "commit": commit, "date": date, "paths": {}}}
    for lang, (folder, suffix) in SOURCES.items():
        files = sorted(p for p in git("ls-tree", "--name-only", "HEAD", folder).split() if p.endswith(suffix))
        types: dict[str, ApiType] = {}
        for path in files:
            read_types(git("show", f"HEAD:{path}"), lang, types)
        table["source"]["paths"][lang] = files
        table[lang] = {name: {k: v for k, v in vars(api).items() if v} for name, api in sorted(types.items())}
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path,
                        help="a clone of github.com/google-ai-edge/LiteRT (its .git, or a bare one)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    git_dir = args.git_dir / ".git" if (args.git_dir / ".git").exists() else args.git_dir
    table = read_api(git_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    tmp.replace(args.out)
    counts = {lang: len(table[lang]) for lang in SOURCES}
    print(f"{args.out}: LiteRT {table['source']['commit'][:12]} ({table['source']['date']}), "
          f"{counts['kotlin']} Kotlin and {counts['swift']} Swift types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
