"""The docs' examples against the code: every shell block in README.md and docs/ is run by a test as printed, or
says why not; the cheap ones are run here. Kotlin and Swift snippets, which nothing here compiles, call the
functions their page defines with the arguments those take. Blocks are read with tests/doc_blocks.py."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.doc_blocks import NOT_RUN, REPO, Block, doc_block, blocks_read_by, fenced_blocks
from tests.test_docs import pages


# ---- every shell block: run by a test, or marked not run with its reason ----

def defined_tests(file: Path) -> dict[str, ast.FunctionDef]:
    """The test functions a test file defines, by name; none where it does not exist."""
    body = ast.parse(file.read_text()).body if file.is_file() else []
    return {node.name: node for node in body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def read_blocks(page: str, heading: str, root: Path) -> tuple[Path, int] | str:
    """(page, fence line) of the block doc_block(page, heading) reads in `root`, or why it reads none."""
    try:
        block = doc_block(page, heading, root=root)
    except (AssertionError, OSError) as exc:
        return str(exc).splitlines()[0]
    return block.page, block.line


def shell_blocks(root: Path = REPO) -> list[Block]:
    return [block for page in pages(root) for block in fenced_blocks(page) if block.shell]


def block_problems(root: Path = REPO, tests: Path = REPO / "tests") -> list[str]:
    """What is wrong with the marks of the shell blocks under `root`, given the test files in `tests`."""
    problems = []
    for block in shell_blocks(root):
        if block.run_by and block.not_run is not None:
            problems.append(f"{block.where()}: marked both run by {'::'.join(block.run_by)} and `{NOT_RUN}`")
        elif block.run_by:
            file, name = block.run_by
            functions = defined_tests(tests / Path(file).name)
            if name not in functions:
                problems.append(f"{block.where()}: run by {file}::{name}, which does not exist")
                continue
            reads = [read_blocks(page, heading, root) for page, heading in blocks_read_by(functions[name])]
            if (block.page, block.line) not in reads:
                problems.append(f"{block.where()}: run by {file}::{name}, which never reads it with doc_block(PAGE, "
                                f"HEADING) or readme_block(HEADING) (it reads: {reads or 'no block'})")
        elif block.not_run is None:
            problems.append(f"{block.where()}: a ```{block.lang} block no test runs and none says why: run it in a "
                            f"test (doc_block), with `<!-- run by tests/FILE.py::TEST -->` on the line before its "
                            f"fence, or start it with `{NOT_RUN}: REASON`")
        elif not re.search(r"\w{3}", block.not_run):
            problems.append(f"{block.where()}: `{NOT_RUN}` without a reason")
        else:
            for file, name in re.findall(r"\b(tests/test_\w+\.py)(?:::(test_\w+))?", block.not_run):
                named = tests / Path(file).name
                if not named.is_file() or name and name not in defined_tests(named):
                    problems.append(f"{block.where()}: its reason names {file}{'::' + name if name else ''}, "
                                    f"which does not exist")
    # The other way round: a test that reads a block as printed says so on the block.
    for file in sorted(tests.glob("test_*.py")):
        for name, function in defined_tests(file).items():
            for page, heading in blocks_read_by(function):
                found = read_blocks(page, heading, root)
                if isinstance(found, str):
                    problems.append(f"tests/{file.name}::{name} reads doc_block({page!r}, {heading!r}): {found}")
                    continue
                block = next(b for b in fenced_blocks(found[0]) if b.line == found[1])
                if block.run_by is None:
                    problems.append(f"{block.where()}: tests/{file.name}::{name} runs it: put `<!-- run by "
                                    f"tests/{file.name}::{name} -->` on the line before its fence")
    return problems


def test_every_shell_block_is_run_by_a_test_or_says_why_not(capsys):
    problems = block_problems()
    assert not problems, "\n".join(problems)
    blocks = shell_blocks()
    run = [b for b in blocks if b.run_by]
    assert len(blocks) > 15 and run  # the parser finds the docs' blocks
    with capsys.disabled():
        print(f"\n{len(blocks)} shell blocks in README.md and docs/: {len(run)} run by tests, "
              f"{len(blocks) - len(run)} marked not run")


def copy_pages(root: Path) -> None:
    (root / "docs").mkdir(parents=True)
    for page in pages():
        shutil.copy(page, root / page.relative_to(REPO))


def edit(path: Path, old: str, new: str) -> int:
    """Replace the one `old` in `path`; the line it was on."""
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))
    return text[:text.index(old)].count("\n") + 1


def test_an_unmarked_block_and_a_marker_that_lies_are_reported_with_file_and_line(tmp_path):
    copy_pages(tmp_path)
    assert block_problems(tmp_path) == []
    docs = tmp_path / "docs"
    # A run block whose marker is gone; a marker naming a test that reads another block; a not-run reason naming a
    # test file that does not exist; a marker naming a test that does not exist; a new block nobody marked.
    unmarked_run = edit(docs / "app-integration.md", "<!-- run by tests/test_doc_examples.py::"
                        "test_the_reference_input_command_runs_as_printed -->\n", "")
    lying = edit(docs / "publishing.md", "test_the_remote_commands_run_as_printed -->",
                 "test_the_gpu_lint_command_runs_as_printed -->") + 1
    reason = edit(docs / "report.md", "tests/test_farm_e2e.py checks", "tests/test_farm_e2e_gone.py checks") - 1
    gone = edit(docs / "rewrites.md", "test_the_gpu_lint_command_runs_as_printed -->",
                "test_the_gpu_lint_command_runs -->") + 1
    new = edit(docs / "security.md", "## Keys: make, pin, rotate\n",
               "## Keys: make, pin, rotate\n\n```bash\nfarm keys --help\n```\n") + 2

    problems = block_problems(tmp_path)
    where = [p.split(": ")[0] for p in problems]
    assert where == [f"{docs / 'app-integration.md'}:{unmarked_run}", f"{docs / 'publishing.md'}:{lying}",
                     f"{docs / 'report.md'}:{reason}", f"{docs / 'rewrites.md'}:{gone}",
                     f"{docs / 'security.md'}:{new}", f"{docs / 'app-integration.md'}:{unmarked_run}"], problems
    assert "a ```sh block no test runs and none says why" in problems[0]
    assert "run by tests/test_doc_examples.py::test_the_gpu_lint_command_runs_as_printed, which never reads it" \
           in problems[1]
    assert "its reason names tests/test_farm_e2e_gone.py, which does not exist" in problems[2]
    assert "run by tests/test_doc_examples.py::test_the_gpu_lint_command_runs, which does not exist" in problems[3]
    assert "a ```bash block no test runs" in problems[4]
    assert "tests/test_doc_examples.py::test_the_reference_input_command_runs_as_printed runs it: put" in problems[5]


# ---- the cheap blocks, run as printed ----

def farm_checkout(cwd: Path) -> dict[str, str]:
    """An environment in which `cwd` is a farm checkout as its commands see it: `.venv/bin/python` (this interpreter,
    importing this checkout's code) first on PATH, as make puts it."""
    bin_ = cwd / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_ / "python").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}


def run_as_printed(block: Block, cwd: Path, env: dict[str, str],
                   supply=lambda command: command) -> list[subprocess.CompletedProcess]:
    """Each command of `block` in bash, once `supply` has filled in its placeholders. A failure names the block and
    the command as printed."""
    done = []
    for command in block.commands:
        proc = subprocess.run(["bash", "-c", supply(command)], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, \
            f"{block.where()}: `{command}` exited {proc.returncode}:\n" + (proc.stdout + proc.stderr)[-3000:]
        done.append(proc)
    return done


def test_the_remote_commands_run_as_printed(tmp_path):
    """docs/publishing.md's `make remote` lines and their commit, placeholders and all, in a checkout holding this
    one's Makefile and committed .dvc/config."""
    block = doc_block("docs/publishing.md", "## Remotes")
    for name in ("Makefile", "pyproject.toml", ".dvc/config"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
        os.utime(tmp_path / name, (1e9, 1e9))
    env = farm_checkout(tmp_path)
    (tmp_path / ".venv" / ".installed").touch()
    # make's venv stamp is up to date: `make remote` runs the command alone, never pip.
    assert subprocess.run(["make", "-q", ".venv/.installed"], cwd=tmp_path, env=env).returncode == 0
    for git in (["init", "-q"], ["config", "user.name", "t"], ["config", "user.email", "t@t"], ["add", "-A"],
                ["commit", "-qm", "a farm"]):
        subprocess.run(["git", *git], cwd=tmp_path, env=env, check=True)

    done = run_as_printed(block, tmp_path, env)
    for command, proc in zip(block.commands, done):
        if pointed := re.match(r"make remote URL=(\S+)(?: ENDPOINT=(\S+))?", command):
            url, endpoint = pointed.groups()
            said = f"remote 'storage' (.dvc/config): {url}" + (f", endpoint {endpoint}" if endpoint else "")
            assert said + "\n" in proc.stdout, (command, proc.stdout)
    last_url = re.findall(r"make remote URL=(\S+)", "\n".join(block.commands))[-1]
    committed = subprocess.run(["git", "show", "HEAD:.dvc/config"], cwd=tmp_path, capture_output=True, text=True,
                               check=True).stdout
    assert f"url = {last_url}\n" in committed and "endpointurl" not in committed, committed
    assert subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True).stdout == ""


def tiny_fp16_file(path: Path) -> Path:
    """A .tflite shaped like a shipped file, written from LiteRT's schema (no converter): an FP16 weight through
    DEQUANTIZE into a FULLY_CONNECTED, [1, 4] -> [1, 2]."""
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    def tensor(name, shape, kind, buffer):
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = name.encode(), shape, kind, buffer
        return t

    def operator(code, inputs, outputs):
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = code, inputs, outputs
        return op

    model = schema.ModelT()
    model.version = 3
    model.operatorCodes = []
    for builtin in (schema.BuiltinOperator.DEQUANTIZE, schema.BuiltinOperator.FULLY_CONNECTED):
        code = schema.OperatorCodeT()
        code.builtinCode, code.deprecatedBuiltinCode, code.version = builtin, builtin, 1
        model.operatorCodes.append(code)
    weights = schema.BufferT()
    weights.data = np.ones((2, 4), np.float16).tobytes()
    model.buffers = [schema.BufferT(), weights]
    graph = schema.SubGraphT()
    graph.tensors = [tensor("x", [1, 4], schema.TensorType.FLOAT32, 0),
                     tensor("w16", [2, 4], schema.TensorType.FLOAT16, 1),
                     tensor("w", [2, 4], schema.TensorType.FLOAT32, 0),
                     tensor("y", [1, 2], schema.TensorType.FLOAT32, 0)]
    graph.inputs, graph.outputs = [0], [3]
    fc = operator(1, [0, 2, -1], [3])
    fc.builtinOptionsType = schema.BuiltinOptions.FullyConnectedOptions
    fc.builtinOptions = schema.FullyConnectedOptionsT()
    graph.operators = [operator(0, [1], [2]), fc]
    model.subgraphs = [graph]
    flatbuffer_utils.write_model(model, path)
    return path


def gpu_lint_as_printed(block: Block, tmp: Path) -> list[dict]:
    """The block's commands with FILE a tiny FP16 file; each one's JSON report."""
    file = tiny_fp16_file(tmp / "tiny_fp16.tflite")
    done = run_as_printed(block, tmp, farm_checkout(tmp), supply=lambda command: command.replace("FILE", str(file)))
    return [json.loads(proc.stdout) for proc in done]


def test_the_gpu_lint_command_runs_as_printed(tmp_path):
    block = doc_block("docs/rewrites.md", "## The GPU lint")
    (report,) = gpu_lint_as_printed(block, tmp_path)
    assert report["gpu_clean"] and report["problems"] == [], report
    assert report["op_histogram"] == {"DEQUANTIZE": 1, "FULLY_CONNECTED": 1}
    assert report["weight_dtypes"] == {"FLOAT16": 1}
    limit = re.search(r"--max-tensor-mib (\d+)", block.commands[0])
    assert report["max_tensor_bytes"] == int(limit.group(1)) * 2**20  # the printed limit reached the check


def test_the_reference_input_command_runs_as_printed(tmp_path):
    """docs/app-integration.md's command that writes the reference input a port compares its own with."""
    from da3_litert_farm.model.photo_input import load_photo, preprocess

    block = doc_block("docs/app-integration.md", "## Preprocessing")
    run_as_printed(block, tmp_path, farm_checkout(tmp_path))
    photo, height, width, name = re.search(r"preprocess\(load_photo\('(\w+)'\), (\d+), (\d+)\)\.tofile\('([^']+)'\)",
                                           block.commands[0]).groups()
    expected = preprocess(load_photo(photo), int(height), int(width))
    assert expected.shape == (1, 3, int(height), int(width)) and expected.dtype == np.float32
    np.testing.assert_array_equal(np.fromfile(tmp_path / name, dtype=np.float32), expected.ravel())


def test_a_command_that_drifted_from_the_code_fails_naming_the_block_and_the_command(tmp_path):
    """The GPU lint's example with its last flag renamed (as if the code had dropped it): the marks still hold, so
    only running it finds the drift, and the failure says where and what."""
    copy_pages(tmp_path / "copy")
    printed = doc_block("docs/rewrites.md", "## The GPU lint", root=tmp_path / "copy").commands[0]
    flag = re.findall(r"--[\w-]+", printed)[-1]
    edit(tmp_path / "copy" / "docs" / "rewrites.md", printed, printed.replace(flag, flag + "-gone"))
    assert block_problems(tmp_path / "copy") == []
    drifted = doc_block("docs/rewrites.md", "## The GPU lint", root=tmp_path / "copy")
    with pytest.raises(AssertionError) as failed:
        gpu_lint_as_printed(drifted, tmp_path)
    message = str(failed.value)
    assert message.startswith(f"{drifted.where()}: `{printed.replace(flag, flag + '-gone')}` exited 2:\n"), message
    assert f"unrecognized arguments: {flag}-gone" in message


# ---- Kotlin and Swift snippets: calls of the page's own functions against their definitions ----

DEFINES = {"kotlin": re.compile(r"\bfun\s+(?:<[^>]*>\s*)?(\w+)\s*\("),
           "swift": re.compile(r"\bfunc\s+(\w+)\s*(?:<[^>]*>)?\s*\(")}
OPEN, CLOSE = "([{", ")]}"


def code_only(text: str) -> str:
    """`text` with its string literals' contents and its comments blanked, line breaks kept: only code is read."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("//", i) or text.startswith("/*", i):
            end = text.find("\n", i) if text[i + 1] == "/" else text.find("*/", i) + 2
            end = len(text) if end < (i + 2) else end
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif text[i] == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:end]) + '"')
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def closing(code: str, start: int) -> int:
    """The index of the bracket that closes the one at `start`."""
    depth = 0
    for i in range(start, len(code)):
        depth += (code[i] in OPEN) - (code[i] in CLOSE)
        if depth == 0:
            return i
    raise ValueError(f"unbalanced from {code[start:start + 40]!r}")


def split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets, generics (`Map<String, Int>`) and lambdas."""
    parts, depth, angle, current = [], 0, 0, ""
    for i, c in enumerate(text):
        if c in OPEN:
            depth += 1
        elif c in CLOSE:
            depth -= 1
        elif c == "<" and i + 1 < len(text) and (text[i + 1].isalnum() or text[i + 1] in "(<"):
            angle += 1  # a type argument, not `a < b`
        elif c == ">" and angle and text[i - 1] != "-":
            angle -= 1
        if c == "," and depth == 0 and angle == 0:
            parts.append(current)
            current = ""
        else:
            current += c
    return [p.strip() for p in [*parts, current] if p.strip()]


def parameter(lang: str, text: str) -> tuple[str | None, str, bool]:
    """(the label a call gives it or None, its name, whether it has a default) of one declared parameter."""
    words = [w for w in text.split(":", 1)[0].split() if w not in ("vararg", "inout") and not w.startswith("@")]
    default = bool(re.search(r"(?<![=!<>])=(?![=>])", text))
    if lang == "kotlin":
        return words[-1], words[-1], default
    return (None if words[0] == "_" else words[0]), words[-1], default


def argument_label(lang: str, text: str) -> str | None:
    """The name (Kotlin `budgetMs = 100`) or label (Swift `h: 896`) an argument is passed by."""
    found = re.match(r"(\w+)\s*=(?!=)" if lang == "kotlin" else r"(\w+)\s*:", text)
    return found.group(1) if found else None


def snippet_problems(page: Path) -> tuple[list[str], int]:
    """Each call on `page` of a function a snippet there defines (same language) whose arguments do not fit the
    definition; and how many such calls there are."""
    code = {lang: [] for lang in DEFINES}  # lang -> [(block, code text)]
    for block in fenced_blocks(page):
        if block.lang in DEFINES:
            code[block.lang].append((block, code_only("\n".join(block.body))))
    problems, calls = [], 0
    for lang, snippets in code.items():
        defined = {}  # name -> (line, [(label, name, default)])
        for block, text in snippets:
            for match in DEFINES[lang].finditer(text):
                params = split_top(text[match.end():closing(text, match.end() - 1)])
                defined[match.group(1)] = (block.line + 1 + text[:match.start()].count("\n"),
                                           [parameter(lang, p) for p in params])
        for block, text in snippets:
            for match in re.finditer(r"(?<![\w.])(\w+)\s*\(", text):
                name = match.group(1)
                if name not in defined or re.search(r"\bfunc?\s+(?:<[^>]*>\s*)?$", text[:match.start()]):
                    continue  # not the page's, or its definition
                calls += 1
                end = closing(text, match.end() - 1)
                args = split_top(text[match.end():end])
                def_line, params = defined[name]
                trailing = bool(re.match(r"[ \t]*\{", text[end + 1:]))  # a lambda or closure after the parentheses
                wrong = mismatch(lang, params[:-1] if trailing else params, args)  # it is the last parameter
                args += ["{ ... }"] * trailing
                if wrong:
                    line = block.line + 1 + text[:match.start()].count("\n")
                    required = sum(not default for _, _, default in params)
                    takes = str(len(params)) if required == len(params) else f"{required} to {len(params)}"
                    shown = ", ".join(n if lang == "kotlin" else f"{label}:" if label else f"_ {n}"
                                      for label, n, _ in params)
                    problems.append(f"{page}:{line}: {name}() with {len(args)} argument(s): {wrong}; {name} "
                                    f"({page.name}:{def_line}) takes {takes}: ({shown})")
    return problems, calls


def mismatch(lang: str, params: list[tuple[str | None, str, bool]], args: list[str]) -> str | None:
    """Why `args` do not fit `params`, or None: positional (Kotlin) or labelled (Swift) in order, defaults optional,
    a Kotlin argument by name anywhere after the positional ones."""
    if lang == "kotlin":
        named = [argument_label(lang, a) for a in args if argument_label(lang, a)]
        positional = len(args) - len(named)
        if positional > len(params):
            return f"{positional} positional"
        names = [n for _, n, _ in params]
        unknown = [n for n in named if n not in names[positional:]]
        if unknown:
            return f"no parameter {unknown[0]} after the positional ones"
        missing = [n for i, (_, n, default) in enumerate(params) if i >= positional and n not in named and not default]
        return f"{', '.join(missing)} not passed" if missing else None
    remaining = list(params)
    for arg in args:
        label = argument_label(lang, arg)
        while remaining and remaining[0][0] != label and remaining[0][2]:
            remaining.pop(0)  # a defaulted parameter left out
        if not remaining or remaining[0][0] != label:
            expected = f"{remaining[0][0] or '_'}:" if remaining else "nothing"
            return f"{label or '_'}: where the definition expects {expected}"
        remaining.pop(0)
    missing = [n for _, n, default in remaining if not default]
    return f"{', '.join(missing)} not passed" if missing else None


def test_kotlin_and_swift_snippets_call_their_pages_functions_as_defined(capsys):
    checked = {page: snippet_problems(page) for page in pages()}
    problems = [p for found, _ in checked.values() for p in found]
    assert not problems, "\n".join(problems)
    calls = sum(n for _, n in checked.values())
    assert calls > 5  # the parser finds the snippets' calls
    with capsys.disabled():
        print(f"\n{calls} calls of page-defined Kotlin and Swift functions checked against their definitions")


def test_arity_and_label_drift_in_a_snippet_is_reported_with_file_line_name_and_arity(tmp_path):
    page = tmp_path / "app.md"
    page.write_text('''# An app

```kotlin
fun load(context: Context, asset: String, gpuMode: String): CompiledModel = TODO()
fun draw(depth: FloatArray, h: Int, w: Int, lut: IntArray? = null): Bitmap = TODO()
fun pick(all: List<() -> CompiledModel>, input: (CompiledModel) -> FloatArray, budgetMs: Long) = all[0]()
val a = load(context, "depth/x.tflite", gpuMode = "fp16")    // right: by name
val b = load(context, "depth/x.tflite")                      // drift: gpuMode left out
val c = draw(depth, 896, 672)                                // right: lut has a default
val d = draw(depth, 896, 672, lut, 1)                        // drift: one too many
val e = pick(listOf({ load(context, "f", "fp16") }), { m -> FloatArray(3) }, budgetMs = 100)
val f = pick(listOf(), budget = 100) { m -> FloatArray(3) }  // drift: no parameter budget
// load(context) in a comment, "draw(x)" in a string: not calls
```

```swift
func load(path: String, environment: Environment) throws -> CompiledModel { }
func input(_ buffer: CVPixelBuffer, h: Int, w: Int, scale: Float = 1) -> [Float] { }
let g = try load(path: p, environment: env)                  // right: the Kotlin load's arity is not Swift's
let h = input(buffer, h: 896, w: 672)                        // right: scale has a default
let i = input(buffer, 896, 672)                              // drift: labels left out
```
''')
    problems, calls = snippet_problems(page)
    assert calls == 10
    assert problems == [
        f"{page}:8: load() with 2 argument(s): gpuMode not passed; load (app.md:4) takes 3: (context, asset, gpuMode)",
        f"{page}:10: draw() with 5 argument(s): 5 positional; draw (app.md:5) takes 3 to 4: (depth, h, w, lut)",
        f"{page}:12: pick() with 3 argument(s): no parameter budget after the positional ones; pick (app.md:6) "
        f"takes 3: (all, input, budgetMs)",
        f"{page}:21: input() with 3 argument(s): _: where the definition expects h:; input (app.md:18) takes 3 to "
        f"4: (_ buffer, h:, w:, scale:)"], problems


def test_the_drift_the_issue_found_is_reported_on_a_copy_of_the_page(tmp_path):
    """android.md's tier picker (app-integration.md's when the issue found it) as it was: two arguments to the
    three-parameter loadDepthModel, and the (H, W) pair as one argument to cameraInput(image, h, w)."""
    copy = tmp_path / "android.md"
    shutil.copy(REPO / "docs" / "android.md", copy)
    line = edit(copy, 'loadDepthModel(context, file, modeOf(file, "9x16"))', "loadDepthModel(context, file)")
    edit(copy, 'val (h, w) = shapeOf(m, "9x16"); cameraInput(frame, h, w)', 'cameraInput(frame, shapeOf(m, "9x16"))')
    problems, _ = snippet_problems(copy)
    assert [p.split(" with ")[0] for p in problems] == [f"{copy}:{line}: loadDepthModel()",
                                                        f"{copy}:{line + 1}: cameraInput()"], problems
    assert "2 argument(s): gpuMode not passed; loadDepthModel (android.md:" in problems[0]
    assert "takes 3: (context, asset, gpuMode)" in problems[0] and "takes 3: (image, h, w)" in problems[1]
