"""Issue 30, item 7: bad input, generated. Every generated case must end in a named error (a FarmError: ParamsError
for params.yaml, the client's PullError/TrustError for catalogs and sidecars) before any heavy work: never a
traceback, never a hang, never a write outside the folder it was given.

Cases come from hypothesis with derandomize=True (the same cases every run) and max_examples scaled by
FARM_FAULT_TRIALS. Everything runs in-process through the real entry points (`python -m stages.params`'s main,
`farm`'s main), plus a few subprocess runs for the exit code and the one-line stderr.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

import stages.params
from da3_litert_farm.client import cli, sidecars
from da3_litert_farm.client.catalog import read_catalog
from da3_litert_farm.client.choice import choose
from da3_litert_farm.client.show import summary
from da3_litert_farm.client.trust import Release, TrustError, load_trust, write_release_folder
from da3_litert_farm.client.verify import verify_assets
from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.ops.signing import make_keys, provenance, sign_release
from tests.fault_farm import trials
from tests.farm_repo import REPO

NAMED = "named error before heavy work"
PARAMS_FAULT = "params.yaml mutated (types, ranges, keys, names, duplicate keys, YAML bombs, huge shapes, garbage)"
CATALOG_FAULT = "catalog mutated for farm show/select/diff/pull (fields removed, wrong types, huge numbers, " \
                "path-like names, not JSON)"
SIDECAR_FAULT = "assets mutated for farm verify (sidecar fields, types, huge numbers, not JSON, path-like names, " \
                "malformed signed catalog, links out)"


def cases(n: int = 25):
    """hypothesis settings: the same cases every run, n per FARM_FAULT_TRIALS trial (3 in `make test`)."""
    return settings(max_examples=n * trials(), derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


class Trials:
    """The outcome of each generated case of one fault, logged once its class has run."""

    def __init__(self, fault_log, fault: str):
        self.log, self.fault, self.outcomes = fault_log, fault, []

    def refused(self, call, error: type = FarmError) -> FarmError:
        """Run `call`; it must raise `error`. Anything else (a return, another exception) is an escape."""
        try:
            call()
        except error as exc:
            self.outcomes.append(NAMED)
            return exc
        except Exception as exc:  # noqa: BLE001 (an escape is what this suite looks for)
            self.outcomes.append(f"escaped: {type(exc).__name__}")
            raise
        self.outcomes.append("accepted")
        raise AssertionError("accepted")

    def record(self) -> None:
        for outcome in self.outcomes:
            self.log.add(self.fault, outcome, consistent=outcome == NAMED)


def one_line_refusal(err: str, prefix: str) -> str:
    """A command's stderr after a refusal: exactly one line `prefix: message`, no traceback."""
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith(prefix), err
    return err


# ==== params.yaml ====

BASE_PARAMS = yaml.safe_load((REPO / "params.yaml").read_text())
FRACTIONS = ["validation.min_pearson", "validation.max_mean_rel", "validation.gpu_min_pearson",
             "validation.gpu_max_mean_rel"]
# What each key holds in a valid params.yaml, for values of every other kind.
KINDS = {"models": "dict", "models.small": "dict", "models.small.source": "enum:hub,local,random",
         "models.small.repo": "str", "models.small.revision": "str", "models.small.path": "str|null",
         "models.small.seed": "int", "models.small.outliers": "bool", "tiers": "list", "tiers.0": "int",
         "max_tensor_mib": "int", "aspects": "dict",
         "aspects.9x16": "dict", "aspects.3x4.ratio": "str", "validation": "dict", "validation.gpu": "enum:required,skip",
         "validation.photos": "list", "validation.gpu_photos": "list", "catalog": "dict", "catalog.name": "str",
         "catalog.version": "str", **{f: "num" for f in FRACTIONS}}
REQUIRED = ["models", "tiers", "max_tensor_mib", "aspects", "validation", "catalog", "models.small.source",
            "validation.min_pearson", "validation.max_mean_rel", "validation.gpu", "validation.gpu_min_pearson",
            "validation.gpu_max_mean_rel", "validation.photos", "validation.gpu_photos", "validation.gpu_modes",
            "validation.gpu_mode_gates", "catalog.name", "catalog.version"]
MAPPINGS = {"": ["models", "tiers", "max_tensor_mib", "aspects", "validation", "catalog"],
            "models.small": ["source", "preset", "repo", "revision", "path", "seed", "outliers"],
            "validation": ["min_pearson", "max_mean_rel", "gpu", "gpu_min_pearson", "gpu_max_mean_rel", "photos",
                           "gpu_photos", "gpu_modes", "gpu_mode_gates"],
            "catalog": ["name", "version"], "aspects.9x16": ["ratio", "height", "width"]}

any_value = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                         lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                     max_size=3), max_leaves=8)


def fits(kind: str, value) -> bool:
    """Whether `value` is of the kind a key holds (a finite number for "num": NaN and infinity are not)."""
    if kind.startswith("enum:"):
        return value in kind[5:].split(",")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"dict": isinstance(value, dict), "list": isinstance(value, list), "str": isinstance(value, str),
            "str|null": value is None or isinstance(value, str), "bool": isinstance(value, bool),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "num": number and value == value and abs(value) != float("inf")}[kind]


def place(doc: dict, path: str, value=None, remove: bool = False) -> dict:
    """A copy of `doc` with the value at dotted `path` replaced (numbers index lists) or removed."""
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key = int(last) if isinstance(node, list) else last
    if remove:
        del node[key]
    else:
        node[key] = value
    return doc


def with_key(doc: dict, mapping: str, key: str, value) -> dict:
    """A copy of `doc` with `key` (any text) set in the mapping at dotted path `mapping` ("": the top)."""
    doc = copy.deepcopy(doc)
    node = doc
    for part in filter(None, mapping.split(".")):
        node = node[part]
    node[key] = value
    return doc


def dump(doc) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


side = st.one_of(st.integers(max_value=55), st.integers(min_value=2017), st.just(10 ** 4000),
                 st.integers(56, 2016).filter(lambda v: v % 14), st.floats(56, 2016).map(lambda v: float(round(v))))
out_of_range = st.one_of(
    st.tuples(st.sampled_from(["tiers.0", "aspects.9x16.height"]), side),
    st.tuples(st.just("max_tensor_mib"), st.one_of(st.integers(max_value=15), st.integers(min_value=4097))),
    st.tuples(st.just("models.small.seed"), st.integers(max_value=-1)),
    st.tuples(st.sampled_from(FRACTIONS), st.one_of(st.floats(max_value=0), st.floats(min_value=1, exclude_min=True),
                                                    st.integers(max_value=0), st.integers(min_value=2))),
)
ascii_name = st.text("abcxyz0123456789", min_size=1, max_size=8)
bad_aspect_name = st.one_of(
    st.tuples(ascii_name, st.text(st.characters(min_codepoint=128, exclude_categories=["Cs"]), min_size=1,
                                  max_size=4)).map("".join),                      # unicode
    st.tuples(ascii_name, ascii_name).map("..".join),                             # ..
    st.tuples(ascii_name, ascii_name).map("/".join),                              # a path
    ascii_name.map(lambda n: f"/{n}"), ascii_name.map(lambda n: f"../{n}"),     # absolute, up
    st.just(""), st.just("bundle"), st.just(".."),
    st.integers(65, 2000).map(lambda n: "a" * n),                                 # very long
    st.tuples(ascii_name, st.sampled_from(["\n", ".", ".lock", " ", "\t"])).map("".join),
    st.tuples(st.sampled_from(["-", "_", ".", " "]), ascii_name).map("".join),
)
huge_shape = st.one_of(  # (the aspect's entry, the tiers)
    st.builds(lambda h, w: ({"height": h, "width": w}, [896]), side, st.sampled_from([504, 896])),
    st.builds(lambda h, w: ({"height": h, "width": w}, [896]), st.sampled_from([504, 896]), side),
    st.builds(lambda r: ({"ratio": f"{r}:1"}, [896]), st.integers(19, 10 ** 40)),  # the short side below 56
    st.builds(lambda r: ({"ratio": f"1:{r}"}, [2016]), st.integers(42, 10 ** 40)),
    st.builds(lambda s: ({"ratio": "1:1"}, [s]), st.integers(105, 144).map(lambda p: p * 14)),  # over the tensor plan
)


def bomb(depth: int, width: int, where: str) -> str:
    """A billion-laughs document: `width ** depth` leaves through anchors and aliases, placed at `where`."""
    lines = [f"  l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    text = dump(place(BASE_PARAMS, where, "BOMB")) if where else dump(BASE_PARAMS)
    return "x-anchors:\n" + "\n".join(lines) + "\n" + text.replace("BOMB", f"*l{depth - 1}")


def duplicated(data) -> tuple[str, str, int]:
    """params.yaml with one `key:` line written twice: (text, the key, the line of its second occurrence)."""
    lines = dump(BASE_PARAMS).splitlines()
    keyed = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("-")]
    i = data.draw(st.sampled_from(keyed))
    copy_line = lines[i]
    if not copy_line.rstrip().endswith(":"):  # a scalar: the second one says something else
        copy_line = copy_line.split(":")[0] + ": " + data.draw(st.sampled_from(["1", "x", "null", "'9:16'"]))
    lines.insert(i + 1, copy_line)
    return "\n".join(lines) + "\n", lines[i].split(":")[0].strip().strip("'\""), i + 2


def garbage_documents():
    deep = st.integers(100, 30000)
    return st.one_of(
        st.binary(min_size=1, max_size=300),
        any_value.filter(lambda v: not isinstance(v, dict)).map(dump),          # not a mapping
        st.sampled_from(["", "---\n", "a: 1\n---\nb: 2\n", "\t\t\n", "%YAML 9.9\n---\na: 1\n", "? [a, b]\n: c\n",
                         "[1, 2\n", "{a: }}", "\ufeff\x00\x01"]),
        deep.map(lambda n: "x: " + "[" * n + "]" * n + "\n"),                   # deep nesting
        deep.map(lambda n: "{a: " * n + "b" + "}" * n + "\n"),
        st.integers(4301, 20000).map(lambda n: dump(BASE_PARAMS).replace("seed: 0", "seed: " + "7" * n)),
        st.text(max_size=200),
    )


PARAMS_CLASSES = {
    "wrong types": st.sampled_from(sorted(KINDS)).flatmap(
        lambda path: st.tuples(st.just(path), any_value.filter(lambda v, k=KINDS[path]: not fits(k, v)))).map(
        lambda pv: (dump(place(BASE_PARAMS, pv[0], pv[1])), pv[0].split(".")[0])),
    "out-of-range numbers": out_of_range.map(lambda pv: (dump(place(BASE_PARAMS, *pv)), pv[0].split(".")[0])),
    "missing keys": st.sampled_from(REQUIRED).map(
        lambda p: (dump(place(BASE_PARAMS, p, remove=True)), "missing key")),
    "unknown keys": st.sampled_from(sorted(MAPPINGS)).flatmap(lambda m: st.tuples(
        st.just(m), st.text(min_size=1, max_size=30).filter(lambda k, m=m: k not in MAPPINGS[m]), any_value)).map(
        lambda mkv: (dump(with_key(BASE_PARAMS, *mkv)), "unknown key")),
    "bad aspect names": bad_aspect_name.map(
        lambda n: (dump({**BASE_PARAMS, "aspects": {**BASE_PARAMS["aspects"], n: {"ratio": "1:1"}}}), "aspects")),
    "huge shapes": huge_shape.map(
        lambda et: (dump({**BASE_PARAMS, "tiers": et[1], "aspects": {"big": et[0]}}), "aspects.big")),
    "YAML bombs": st.builds(bomb, st.integers(2, 40), st.integers(2, 40),
                            st.sampled_from(["", "models.small.seed", "validation.photos", "aspects.9x16",
                                             "catalog.name", "tiers"])).map(lambda t: (t, "alias")),
    "not a mapping, binary garbage, deep nesting": garbage_documents().map(lambda t: (t, "")),
}


@pytest.mark.parametrize("kind", list(PARAMS_CLASSES))
def test_generated_bad_params_end_in_a_named_error_before_any_work(kind, tmp_path, monkeypatch, capsys, fault_log):
    """Each case through the params stage's own entry point (`python -m stages.params --write`, in-process): exit
    1, one line `params: ...` naming the problem, nothing written; and load_params raises ParamsError, fast."""
    monkeypatch.chdir(tmp_path)
    log = Trials(fault_log, PARAMS_FAULT)

    @cases()
    @given(PARAMS_CLASSES[kind])
    def case(document):
        text, named = document
        Path("params.yaml").write_bytes(text if isinstance(text, bytes) else text.encode())
        started = time.monotonic()
        error = log.refused(lambda: load_params(Path("params.yaml")), ParamsError)
        assert time.monotonic() - started < 1.0, "refused, but not fast"
        assert named in str(error), str(error)
        assert len(str(error)) < 2000, "the message repeats the input instead of naming the problem"
        capsys.readouterr()
        assert stages.params.main(["--write"]) == 1
        one_line_refusal(capsys.readouterr().err, "params: ")
        assert os.listdir(".") == ["params.yaml"]  # nothing written: no artifacts/params, no stray file

    try:
        case()
    finally:
        log.record()


def test_a_duplicate_key_is_refused_naming_the_key_and_its_line(tmp_path, fault_log):
    """PyYAML keeps the last of two equal keys without a word; params.yaml refuses them."""
    log = Trials(fault_log, PARAMS_FAULT)

    @cases()
    @given(st.data())
    def case(data):
        text, key, line = duplicated(data)
        (tmp_path / "params.yaml").write_text(text)
        error = log.refused(lambda: load_params(tmp_path / "params.yaml"), ParamsError)
        assert re.search(rf"line {line}: duplicate key '{re.escape(key)}'", str(error)), (str(error), key, line)

    try:
        case()
    finally:
        log.record()


@pytest.mark.parametrize("name, text, said", [
    ("duplicate key", dump(BASE_PARAMS).replace("    seed: 0\n", "    seed: 0\n    seed: 5\n"), "duplicate key 'seed'"),
    ("bomb", bomb(12, 12, "models.small.seed"), "alias"),
    ("binary", b"\xff\xfe\x00\x80garbage", "params.yaml"),
    ("deep", "x: " + "[" * 50000 + "]" * 50000, "deeper"),
    ("huge shape", dump({**BASE_PARAMS, "aspects": {"big": {"height": 20160, "width": 896}}}), "aspects.big.height"),
])
def test_the_params_stage_refuses_in_one_line_with_exit_status_1(name, text, said, tmp_path):
    """The real command, as DVC runs it: exit 1, one line on stderr naming the problem, no traceback, nothing
    written."""
    (tmp_path / "params.yaml").write_bytes(text if isinstance(text, bytes) else text.encode())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "stages.params", "--write"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert said in one_line_refusal(done.stderr, "params: ")
    assert time.monotonic() - started < 20
    assert os.listdir(tmp_path) == ["params.yaml"]


# ==== catalogs and sidecars, for the client ====

def model_entry(aspect: str, height: int, width: int, checked: bool, tier: int = 896) -> dict:
    payload = f"model {aspect}".encode()
    gpu = ({"checked": True, "pearson_min": 0.9994, "mean_rel_max": 0.0098, "photos": {"coffee": 0.9994},
            "adapter": "llvmpipe", "precision": "fp16"} if checked else
           {"checked": False, "reason": "validation.gpu is 'skip' in params.yaml"})
    return {"cell": f"small-{tier}-{aspect}", "model": "small", "tier": tier, "aspect": aspect,
            "ratio": f"{width}:{height}", "height": height, "width": width,
            "file": f"artifacts/models/small/{tier}/{aspect}/model_fp16.tflite", "sha256": hashlib.sha256(payload).hexdigest(),
            "bytes": len(payload), "precision": "fp16-weights",
            "input": {"shape": [1, 3, height, width], "layout": "NCHW", "dtype": "float32",
                      "preprocessing": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}},
            "output": {"shape": [1, 1, height, width], "layout": "NCHW", "dtype": "float32", "meaning": "depth"},
            "fidelity": {"pearson_min": 0.9999996, "mean_rel_error_max": 0.00075,
                         "photos": {"coffee": 0.9999996, "astronaut": 0.9999998}},
            "gpu": gpu}


def base_catalog(version: str = "1.0.1") -> dict:
    return {"schema_version": 2, "name": "da3-small-litert", "version": version, "created": "2026-12-05T00:00:00Z",
            "sources": {"small": {
                "checkpoint": {"source": "hub", "repo": "depth-anything/DA3-SMALL", "revision": "main",
                               "resolved_revision": "0123abcd" * 5, "path": None, "seed": 0, "model_name": "da3-small",
                               "weights_sha256": "ab" * 32},
                "license": {"code": "Apache-2.0", "weights": "Apache-2.0", "weights_source": "hub",
                            "attribution": "DA3"}}},
            "tools": {"torch": "2.13.0", "dvc": "3.67.1"},
            "models": [model_entry("9x16", 896, 504, True), model_entry("16x9", 504, 896, False)],
            "bundles": [{"bundle": "small-896", "model": "small", "tier": 896,
                         "file": "artifacts/bundles/small-896/model_fp16.tflite", "sha256": "cd" * 32, "bytes": 1000,
                         "singles_bytes": 2000, "precision": "fp16-weights",
                         "signatures": [{"signature": "16x9", "cell": "small-896-16x9"},
                                        {"signature": "9x16", "cell": "small-896-9x16"}],
                         "gpu": {"checked": False}, "load": {"cpu": {}}}]}


def leaf_paths(value, prefix: str = "") -> list[str]:
    """Every dotted path in a JSON document (objects and lists both)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    paths = []
    for key, child in items:
        path = f"{prefix}{key}"
        paths += [path, *leaf_paths(child, f"{path}.")]
    return paths


CATALOG_REQUIRED = ["schema_version", "name", "version", "sources", "sources.small.checkpoint",
                    "sources.small.checkpoint.source", "models", "models.0.cell", "models.0.model", "models.0.tier",
                    "models.0.aspect",
                    "models.0.ratio", "models.0.height", "models.0.width", "models.0.file", "models.0.sha256",
                    "models.0.bytes", "models.0.fidelity", "models.0.fidelity.pearson_min",
                    "models.0.fidelity.mean_rel_error_max", "models.0.fidelity.photos", "models.0.gpu.pearson_min",
                    "models.0.gpu.mean_rel_max", "models.0.gpu.photos", "models.0.gpu.adapter",
                    "models.0.gpu.precision", "models.1.aspect", "models.1.height", "bundles.0.bundle",
                    "bundles.0.model", "bundles.0.tier", "bundles.0.file", "bundles.0.sha256", "bundles.0.bytes",
                    "bundles.0.precision", "bundles.0.signatures", "bundles.0.signatures.0.signature",
                    "bundles.0.signatures.0.cell", "bundles.0.load", "sources.small.license.code",
                    "sources.small.license.weights"]
CATALOG_KINDS = {"name": "str", "version": "str", "created": "str", "sources": "dict",
                 "sources.small": "dict", "sources.small.checkpoint": "dict",
                 "sources.small.checkpoint.source": "enum:hub,local,random", "sources.small.checkpoint.seed": "int|null",
                 "sources.small.checkpoint.weights_sha256": "str|null", "sources.small.checkpoint.repo": "str|null",
                 "tools": "dict", "sources.small.license": "dict", "sources.small.license.code": "str",
                 "sources.small.license.attribution": "str|null", "models": "list",
                 "bundles": "list", "bundles.0": "dict", "bundles.0.signatures": "list", "bundles.0.signatures.0": "dict",
                 "bundles.0.signatures.0.signature": "str", "bundles.0.bytes": "int", "bundles.0.file": "str",
                 **{f"models.{i}.{k}": kind for i in (0, 1) for k, kind in (
                     ("cell", "str"), ("model", "str"), ("tier", "int"), ("aspect", "str"), ("ratio", "str"), ("height", "int"), ("width", "int"), ("file", "str"),
                     ("sha256", "str"), ("bytes", "int"), ("precision", "str"), ("input", "dict"),
                     ("output", "dict"), ("fidelity", "dict"), ("fidelity.pearson_min", "num"),
                     ("fidelity.mean_rel_error_max", "num"), ("fidelity.photos", "list|dict"), ("gpu", "dict|null"),
                     ("gpu.checked", "bool"))},
                 "models.0.gpu.pearson_min": "num", "models.0.gpu.adapter": "str", "models.0": "dict"}
PATH_LIKE = st.sampled_from(["../x", "../../x.tflite", "/etc/passwd", "/tmp/x.tflite", "a/../../b.tflite", "..", "",
                             ".", "x\n", "a\\..\\b.tflite", "artifacts//x.tflite"])


def fits_catalog(kind: str, value) -> bool:
    return any(fits(k, value) if k in ("dict", "list", "str", "int", "num", "bool") or k.startswith("enum:")
               else value is None for k in kind.split("|"))


def catalog_cases():
    """(the catalog's bytes, what was done): each one a catalog no client may use."""
    doc = base_catalog()
    not_finite = st.sampled_from([float("nan"), float("inf"), float("-inf"), 10 ** 400, 2 ** 64, True, "1"])
    not_a_count = st.one_of(st.integers(max_value=0), st.integers(min_value=2 ** 64), not_finite, st.just(896.0))
    return st.one_of(
        st.sampled_from(CATALOG_REQUIRED).map(lambda p: (place(doc, p, remove=True), f"removed {p}")),
        st.sampled_from(sorted(CATALOG_KINDS)).flatmap(lambda p: st.tuples(
            st.just(p), any_value.filter(lambda v, k=CATALOG_KINDS[p]: not fits_catalog(k, v)))).map(
            lambda pv: (place(doc, *pv), f"{pv[0]} of a wrong type")),
        st.tuples(st.sampled_from(["models.0.height", "models.1.width", "models.0.bytes", "bundles.0.bytes",
                                   "models.0.tier"]),
                  not_a_count).map(lambda pv: (place(doc, *pv), f"{pv[0]} out of range")),
        st.tuples(st.sampled_from(["models.0.fidelity.pearson_min", "models.1.fidelity.mean_rel_error_max",
                                   "models.0.gpu.pearson_min"]), not_finite).map(
            lambda pv: (place(doc, *pv), f"{pv[0]} not finite")),
        st.tuples(st.sampled_from(["name", "version", "models.0.aspect", "models.0.cell", "models.0.model",
                                   "models.1.file", "bundles.0.file", "bundles.0.bundle",
                                   "bundles.0.signatures.1.cell"]), PATH_LIKE).map(
            lambda pv: (place(doc, *pv), f"{pv[0]} path-like")),
        st.just((place(place(doc, "models.1.aspect", "9x16"), "models.1.cell", "small-896-9x16"),
                 "two files of one cell")),
        st.just((place(doc, "models.1.cell", "small-518-16x9"), "a cell that is not its model, tier and aspect")),
        st.just((place(doc, "schema_version", 1), "a catalog of schema 1")),
    ).map(lambda dt: ((json.dumps(dt[0], indent=2) + "\n").encode(), dt[1])) | st.one_of(
        st.binary(max_size=200), st.text(max_size=100).map(str.encode),
        any_value.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
        st.integers(1000, 100000).map(lambda n: ("[" * n + "]" * n).encode()),
        st.integers(1, 2000).map(lambda n: json.dumps(doc).encode()[:-n]),       # truncated
        st.integers(4301, 10000).map(lambda n: json.dumps(doc).replace('"bytes": 1000', '"bytes": ' + "9" * n)
                                     .encode()),
    ).map(lambda b: (b, "not a catalog"))


class FakeFarm:
    """A farm repository as the client sees it, without git or DVC: versions 1.0.0 (valid) and 1.0.1 (served from
    `catalog`). The download is recorded: no refused case may reach it."""

    def __init__(self, monkeypatch):
        self.catalog, self.downloads = b"", []
        good = (json.dumps(base_catalog("1.0.0")) + "\n").encode()

        class Api:
            @staticmethod
            def read(path, repo, rev):
                assert path == "artifacts/catalog.json"
                return (good if rev.endswith("1.0.0") else self.catalog).decode("utf-8", "surrogateescape")

        class DvcError(Exception):
            pass

        monkeypatch.setattr("da3_litert_farm.client.catalog.published_versions", lambda repo: ["1.0.0", "1.0.1"])
        monkeypatch.setattr("da3_litert_farm.client.catalog._dvc_api", lambda: (Api, DvcError))
        monkeypatch.setattr("da3_litert_farm.client.catalog.read_release", lambda repo, version: Release(
            f"catalog/v{version}", good if version == "1.0.0" else self.catalog, None, None, ""))
        monkeypatch.setattr("da3_litert_farm.client.pull.download", lambda path, repo, rev, remote, dest: (
            self.downloads.append(path), dest.write_bytes(b"not the model")))


def test_the_valid_catalog_is_read_by_every_command(tmp_path, monkeypatch, capsys):
    """The generated cases mutate this one catalog; unmutated, every command takes it."""
    farm = FakeFarm(monkeypatch)
    farm.catalog = (json.dumps(base_catalog()) + "\n").encode()
    for argv in (["show", "--repo", "R", "--version", "1.0.1"], ["diff", "--repo", "R", "1.0.0", "1.0.1"],
                 ["select", "--repo", "R", "--version", "1.0.1", "--camera", "1080x1920"]):
        assert cli.main(argv) == 0, capsys.readouterr().err
    assert "9x16" in capsys.readouterr().out
    # pull reaches the download (stubbed: nothing downloaded, so the sha256 check refuses, naming it)
    assert cli.main(["pull", "--repo", "R", "--version", "1.0.1", "--aspect", "9x16", "--out",
                     str(tmp_path / "assets"), "--allow-unsigned"]) == 1
    assert len(farm.downloads) == 1 and "sha256 mismatch" in capsys.readouterr().err


def test_generated_bad_catalogs_end_in_a_named_error_for_every_command(tmp_path, monkeypatch, capsys, fault_log):
    """`farm show`, `select --camera`, `select --aspect`, `diff` and `pull` (unsigned allowed, both a model and the
    bundle) over a mutated catalog: exit 1 with one line `farm CMD: ...`, no download, nothing written."""
    farm = FakeFarm(monkeypatch)
    log = Trials(fault_log, CATALOG_FAULT)
    out = tmp_path / "app"
    commands = [["show", "--repo", "R", "--version", "1.0.1"], ["show", "--repo", "R", "--version", "1.0.1", "--json"],
                ["select", "--repo", "R", "--version", "1.0.1", "--camera", "1080x1920"],
                ["select", "--repo", "R", "--version", "1.0.1", "--aspect", "16x9"],
                ["diff", "--repo", "R", "1.0.0", "1.0.1"],
                ["pull", "--repo", "R", "--version", "1.0.1", "--camera", "1920x1080", "--out", str(out / "assets"),
                 "--allow-unsigned", "--allow-stress"],
                ["pull", "--repo", "R", "--version", "1.0.1", "--bundle", "--out",
                 str(out / "assets"), "--allow-unsigned", "--allow-stress"]]

    @cases(8)
    @given(catalog_cases())
    def case(mutated):
        farm.catalog, what = mutated
        capsys.readouterr()
        error = log.refused(lambda: read_catalog("R", "1.0.1"))
        assert "1.0.1" in str(error), str(error)
        try:
            doc = json.loads(farm.catalog)
        except (ValueError, RecursionError):
            doc = None
        if doc is not None:  # each reader on its own, as a library caller would call it
            for read in (summary, lambda d: choose(d, None, (1080, 1920)), lambda d: choose(d, "9x16", None),
                         lambda d: sidecars.bundle_sidecar(d, "R", "b.tflite")):
                with pytest.raises(FarmError):
                    read(doc)
        for argv in commands:
            assert cli.main(argv) == 1, f"{what}: farm {' '.join(argv)} took it"
            one_line_refusal(capsys.readouterr().err, f"farm {argv[0]}: ")
        assert farm.downloads == [] and not out.exists()

    try:
        case()
    finally:
        log.record()


# ---- farm verify ----

@pytest.fixture(scope="module")
def signed_assets(tmp_path_factory):
    """An assets folder as `farm pull --trust` leaves it (two models, the bundle's absence is fine), signed with a
    throwaway key; and the key."""
    root = tmp_path_factory.mktemp("signed")
    public = make_keys(root / "keys" / "publisher.pem")
    doc = base_catalog()
    data = (json.dumps(doc, indent=2) + "\n").encode()
    files = sign_release(data, provenance(doc, "0" * 40, {}), root / "keys" / "publisher.pem", root / "signed")
    release = Release("catalog/v1.0.1", data, files["provenance.json"], files["signature.sig"], "")
    folder = root / "assets"
    write_release_folder(release, folder / sidecars.release_folder_name(doc))
    for entry in doc["models"]:
        name = sidecars.model_file_name(doc, entry)
        (folder / name).write_bytes(f"model {entry['aspect']}".encode())
        document = sidecars.sidecar(doc, entry, "git@example.com:ml/farm.git", "aspect requested", name)
        document["signature"] = {"verified": True, "release": release.tag}
        (folder / f"{name}.json").write_text(json.dumps(document, indent=2))
    return folder, public, root / "keys" / "publisher.pem", doc


def test_the_signed_assets_verify(signed_assets, capsys):
    folder, public, _, _ = signed_assets
    assert cli.main(["verify", str(folder), "--trust", str(public)]) == 0, capsys.readouterr().err
    assert "verified 2 files" in capsys.readouterr().out


def sidecar_cases(sidecar: dict):
    unsigned = ("selected", "signature", "catalog.repo")
    signed_paths = [p for p in leaf_paths(sidecar) if not p.startswith(unsigned)]
    numbers = [p for p in signed_paths if isinstance(eval_path(sidecar, p), (int, float))
               and not isinstance(eval_path(sidecar, p), bool)]
    huge = st.one_of(st.just(10 ** 400), st.just(float("nan")), st.just(float("inf")), st.integers(min_value=2 ** 64),
                     st.integers(max_value=-1))
    text = lambda doc: (json.dumps(doc, indent=2) + "\n").encode()  # noqa: E731
    return st.one_of(
        st.sampled_from(signed_paths).map(lambda p: text(place(sidecar, p, remove=True))),
        st.tuples(st.sampled_from(signed_paths + ["catalog.version", "catalog.repo", "catalog", "selected"]),
                  any_value).filter(lambda pv: eval_path(sidecar, pv[0]) != pv[1] and not (
                      pv[0] in ("selected", "catalog.repo") and isinstance(pv[1], str))).map(
            lambda pv: text(place(sidecar, *pv))),
        st.tuples(st.sampled_from(numbers), huge).map(lambda pv: text(place(sidecar, *pv))),
        st.tuples(st.sampled_from(["model_file", "catalog.version", "catalog.name", "aspect", "catalog.tag"]),
                  PATH_LIKE).map(lambda pv: text(place(sidecar, *pv))),
        st.binary(max_size=200), st.text(max_size=100).map(str.encode),
        any_value.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
        st.integers(1000, 100000).map(lambda n: ("{\"a\": " * n + "1" + "}" * n).encode()),
        st.integers(1, 500).map(lambda n: text(sidecar)[:-n - 1]),  # cut short (the newline kept no JSON)
    )


def eval_path(doc, path: str):
    for part in path.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def test_generated_bad_sidecars_fail_farm_verify_with_a_named_error(signed_assets, tmp_path, capsys, fault_log):
    """`farm verify DIR --trust KEY` over a pulled folder whose sidecar was mutated: exit 1, one line naming the
    sidecar (TrustError), nothing written in the folder."""
    source, public, _, _ = signed_assets
    (sidecar_file,) = sorted(source.glob("*-9x16-*.json"))
    sidecar = json.loads(sidecar_file.read_text())
    log = Trials(fault_log, SIDECAR_FAULT)
    count = iter(range(10 ** 6))

    @cases(10)
    @given(sidecar_cases(sidecar))
    def case(mutated):
        folder = tmp_path / f"case{next(count)}"
        shutil.copytree(source, folder)
        (folder / sidecar_file.name).write_bytes(mutated)
        before = sorted(p.name for p in folder.rglob("*"))
        capsys.readouterr()
        error = log.refused(lambda: verify_assets(folder, load_trust([str(public)])), TrustError)
        assert sidecar_file.name in str(error) or sidecar_file.name[:-5] in str(error), str(error)
        assert cli.main(["verify", str(folder), "--trust", str(public)]) == 1
        one_line_refusal(capsys.readouterr().err, "farm verify: ")
        assert sorted(p.name for p in folder.rglob("*")) == before
        shutil.rmtree(folder)

    try:
        case()
    finally:
        log.record()


def test_a_signed_but_malformed_catalog_fails_farm_verify_with_a_named_error(signed_assets, tmp_path, capsys,
                                                                             fault_log):
    """The release folder's catalog, mutated and signed again with the trusted key (a publisher's bug, or a key
    misused): the signature verifies, so the catalog's own check must refuse it."""
    source, public, private, doc = signed_assets
    log = Trials(fault_log, SIDECAR_FAULT)
    count = iter(range(10 ** 6))
    statement = provenance(doc, "0" * 40, {})

    @cases(4)
    @given(catalog_cases())
    def case(mutated):
        data, what = mutated
        folder = tmp_path / f"case{next(count)}"
        shutil.copytree(source, folder)
        (release,) = folder.glob("*.release")
        shutil.rmtree(release)
        files = sign_release(data, statement, private, tmp_path / f"signed{folder.name}")
        write_release_folder(Release("", data, files["provenance.json"], files["signature.sig"], ""), release)
        capsys.readouterr()
        log.refused(lambda: verify_assets(folder, load_trust([str(public)])), TrustError)
        assert cli.main(["verify", str(folder), "--trust", str(public)]) == 1, what
        one_line_refusal(capsys.readouterr().err, "farm verify: ")
        shutil.rmtree(folder)

    try:
        case()
    finally:
        log.record()


@pytest.mark.parametrize("link", ["model", "sidecar", "release"])
def test_farm_verify_does_not_follow_links_out_of_the_folder(signed_assets, tmp_path, link, fault_log):
    """A .tflite, sidecar or release folder in DIR that is a symbolic link to elsewhere: refused, naming it, and
    nothing outside DIR is read."""
    source, public, _, _ = signed_assets
    folder, outside = tmp_path / "assets", tmp_path / "outside"
    shutil.copytree(source, folder)
    (model,) = folder.glob("*-9x16-*.tflite")
    target = {"model": model, "sidecar": model.with_name(f"{model.name}.json"),
              "release": next(folder.glob("*.release"))}[link]
    outside.mkdir()
    moved = outside / target.name
    shutil.move(str(target), moved)
    target.symlink_to(moved)
    # What the link points to is the valid file itself: were it followed, verify would pass.
    log = Trials(fault_log, SIDECAR_FAULT)
    error = log.refused(lambda: verify_assets(folder, load_trust([str(public)])), TrustError)
    log.record()
    assert f"{target.name} is a symbolic link" in str(error)


def test_farm_verify_refuses_in_one_line_with_exit_status_1(signed_assets, tmp_path):
    """The installed command, as a build step runs it: a sidecar whose catalog.version is a list."""
    source, public, _, _ = signed_assets
    folder = tmp_path / "assets"
    shutil.copytree(source, folder)
    (side,) = folder.glob("*-9x16-*.json")
    side.write_text(json.dumps({**json.loads(side.read_text()), "catalog": {"version": ["1.0.1"]}}))
    done = subprocess.run([sys.executable, "-m", "da3_litert_farm.client.cli", "verify", str(folder), "--trust",
                           str(public)], capture_output=True, text=True, timeout=60, env={**os.environ,
                                                                                           "PYTHONPATH": str(REPO)})
    assert done.returncode == 1
    assert side.name in one_line_refusal(done.stderr, "farm verify: ")
