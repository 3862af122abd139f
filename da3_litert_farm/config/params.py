"""The one loader of params.yaml: parse, check everything cheap, return typed settings.

Every stage calls `load_params()` first, so a bad params.yaml fails in well under a second,
before any model loads and before any output is touched. Each error names the key, the
offending value and what is allowed.

Keys, types, enums, ranges and patterns are in params.schema.json (JSON Schema 2020-12);
this module adds what a schema cannot say: the shapes planned from the aspects, the GPU
tensor plan, a local checkpoint's files and rules across fields. The values owned by Python
constants (the patch size, the aspect-name rule, the photo names) reach both schemas, this one
and the catalog's, as constants.schema.json, made here from those constants.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.core.aspects import ASPECT_NAME, BUNDLE, MAX_SIDE, MIN_SIDE, PATCH, Aspect, AspectError, \
    plan_aspect
from da3_litert_farm.core.gpu_modes import APP_MODES, DEFAULT_MODE
from da3_litert_farm.core.models import DEFAULT_PRESET, NOT_CONVERTED, OUTPUTS, PRESETS, Preset
from da3_litert_farm.core.tensor_plan import MIB, plan_tensors
from da3_litert_farm.core.photos import MIN_PHOTOS, PHOTOS

PARAMS_FILE = Path("params.yaml")
SCHEMA_FILE = Path(__file__).with_name("params.schema.json")
SCHEMA_BASE = "https://github.com/da3-litert-farm/"  # the $id of both schemas, less the file name
HUB_FILES = ("config.json", "model.safetensors")
MAX_NAME = 64  # characters of an aspect or catalog name: each becomes part of file names and git tags
MAX_DEPTH = 16  # levels of nesting in params.yaml (it has 3): deeper is not a params file


class ParamsError(FarmError, ValueError):
    """params.yaml is invalid; the message names the key and what is allowed."""


@dataclass(frozen=True)
class CheckpointParams:
    source: str
    preset: str  # the network (core.models); a hub or local checkpoint's config.json must name the same
    repo: str
    revision: str
    path: str | None
    seed: int
    outliers: bool = False  # source: random -> plant DINOv2-like outlier channels (da3_litert_farm.model.stress)


@dataclass(frozen=True)
class ValidationParams:
    min_pearson: float
    max_mean_rel: float
    gpu: str  # "required" | "skip"
    gpu_min_pearson: float
    gpu_max_mean_rel: float
    photos: tuple[str, ...]
    gpu_photos: tuple[str, ...]  # a subset of photos: the GPU stage compares against validate's maps
    gpu_modes: tuple[str, ...] = (DEFAULT_MODE,)  # core.gpu_modes: the GPU check runs the file in each, each gated
    gpu_mode_gates: tuple[tuple[str, float, float], ...] = ()  # (mode, min_pearson, max_mean_rel) where not the above

    def gpu_gates(self, mode: str) -> tuple[float, float, tuple[str, str]]:
        """(min Pearson, max mean relative error, the params keys that set them) of a GPU mode."""
        for name, min_pearson, max_mean_rel in self.gpu_mode_gates:
            if name == mode:
                key = f"validation.gpu_mode_gates.{mode}"
                return min_pearson, max_mean_rel, (f"{key}.min_pearson", f"{key}.max_mean_rel")
        return self.gpu_min_pearson, self.gpu_max_mean_rel, ("validation.gpu_min_pearson", "validation.gpu_max_mean_rel")


@dataclass(frozen=True)
class CatalogParams:
    name: str
    version: str


@dataclass(frozen=True)
class Params:
    checkpoint: CheckpointParams
    long_side: int
    max_tensor_mib: int
    aspects: dict[str, Aspect]
    validation: ValidationParams
    catalog: CatalogParams

    @property
    def model(self) -> Preset:
        return PRESETS[self.checkpoint.preset]

    def aspect(self, name: str) -> Aspect:
        if name not in self.aspects:
            raise ParamsError(f"aspect {name!r} is not in params.yaml; configured: {sorted(self.aspects)}")
        return self.aspects[name]


class _Loader(yaml.SafeLoader):
    """YAML as params.yaml may use it: no aliases (a billion-laughs file expands exponentially in the schema
    check), no key twice (PyYAML keeps the last without a word), nesting at most MAX_DEPTH deep (PyYAML
    recurses), and keys kept as the text written (YAML would read an aspect named 169 as a number, ~ as null)."""

    depth = 0

    def compose_node(self, parent, index):
        line = self.peek_event().start_mark.line + 1
        if self.check_event(yaml.AliasEvent):
            raise ParamsError(f"line {line}: an alias (*{self.peek_event().anchor}); params.yaml takes no anchors "
                              f"or aliases: write the value out")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParamsError(f"line {line}: nested deeper than {MAX_DEPTH} levels: not a params file")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node, deep=False):
        first: dict[str, int] = {}
        for key, _ in node.value:
            line = key.start_mark.line + 1
            if not isinstance(key, yaml.ScalarNode):
                raise ParamsError(f"line {line}: a key must be a name, not a {key.id}")
            if key.value in first:
                raise ParamsError(f"line {line}: duplicate key {key.value!r} (first on line {first[key.value]}): "
                                  f"YAML would keep only the last; remove one")
            first[key.value] = line
        return {key.value: self.construct_object(value, deep=deep) for key, value in node.value}


def load_params(path: Path | str = PARAMS_FILE, checkpoint_files: bool = True) -> Params:
    path = Path(path)
    try:
        loader = _Loader(path.read_bytes())  # bytes: YAML's reader names a byte that is not UTF-8
        try:
            raw = loader.get_single_data()
        finally:
            loader.dispose()
    except FileNotFoundError:
        raise ParamsError(f"{path} not found: run from the repository root") from None
    except OSError as exc:
        raise ParamsError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ParamsError as exc:
        raise ParamsError(f"{path}: {exc}") from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer of more digits than Python converts
        raise ParamsError(f"{path} is not valid YAML: {_clip(str(exc))}") from None
    return parse_params(raw, base_dir=path.resolve().parent, checkpoint_files=checkpoint_files)


def parse_params(raw: object, base_dir: Path = Path("."), checkpoint_files: bool = True) -> Params:
    """Validate a parsed params.yaml document; relative paths resolve against base_dir.

    checkpoint_files=False skips checking that a local checkpoint's files exist: the
    per-aspect stages read the weights from artifacts/checkpoint, and a parallel build's
    workers have that, not the local checkpoint.
    """
    if isinstance(raw, dict) and isinstance(raw.get("aspects"), dict):
        # YAML reads a key such as 169 as a number; an aspect name is the text written.
        raw = {**raw, "aspects": {str(k): v for k, v in raw["aspects"].items()}}
    error = jsonschema.exceptions.best_match(validator_for(load_schema()).iter_errors(raw))
    if error is not None:
        raise ParamsError(_message(error))
    try:
        aspects = _aspects(raw["aspects"], raw["long_side"])
    except AspectError as exc:
        raise ParamsError(str(exc)) from None
    _check_tensor_plan(PRESETS[raw["checkpoint"].get("preset", DEFAULT_PRESET)], raw["max_tensor_mib"], aspects)
    v, c = raw["validation"], raw["catalog"]
    photos = tuple(v.get("photos", PHOTOS))
    gpu_photos = tuple(v.get("gpu_photos", photos))
    if missing := [p for p in gpu_photos if p not in photos]:
        raise ParamsError(f"validation.gpu_photos: {missing} not in validation.photos {list(photos)}: the GPU stage "
                          f"compares with the official depth maps validate@ASPECT saves for validation.photos")
    gpu_modes, mode_gates = tuple(v.get("gpu_modes", (DEFAULT_MODE,))), v.get("gpu_mode_gates", {})
    if unchecked := [m for m in mode_gates if m not in gpu_modes]:
        raise ParamsError(f"validation.gpu_mode_gates: {unchecked} not in validation.gpu_modes {list(gpu_modes)}: "
                          f"gates of a mode the GPU check does not run would never apply")
    if DEFAULT_MODE in mode_gates:
        raise ParamsError(f"validation.gpu_mode_gates: {DEFAULT_MODE!r} is gated by validation.gpu_min_pearson and "
                          f"validation.gpu_max_mean_rel; name only the other modes of validation.gpu_modes")
    return Params(
        checkpoint=_checkpoint(raw["checkpoint"], base_dir, checkpoint_files),
        long_side=raw["long_side"],
        max_tensor_mib=raw["max_tensor_mib"],
        aspects=aspects,
        validation=ValidationParams(
            min_pearson=float(v["min_pearson"]),
            max_mean_rel=float(v["max_mean_rel"]),
            gpu=v["gpu"],
            gpu_min_pearson=float(v["gpu_min_pearson"]),
            gpu_max_mean_rel=float(v["gpu_max_mean_rel"]),
            photos=photos,
            gpu_photos=gpu_photos,
            gpu_modes=gpu_modes,
            gpu_mode_gates=tuple((mode, float(g["min_pearson"]), float(g["max_mean_rel"]))
                                 for mode, g in mode_gates.items()),
        ),
        catalog=CatalogParams(c["name"], c["version"]),
    )


# --- the schemas ---

@functools.cache
def load_schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


def constants_schema() -> dict:
    """The schema rules whose values are Python constants (each kept in one place), as a resource
    both params.schema.json and catalog.schema.json refer to."""
    return {
        "$id": SCHEMA_BASE + "constants.schema.json",
        "$defs": {
            "side": {"type": "integer", "multipleOf": PATCH, "minimum": MIN_SIDE, "maximum": MAX_SIDE,
                     "description": f"an integer number of pixels, a multiple of {PATCH} (the ViT patch size) "
                                    f"in [{MIN_SIDE}, {MAX_SIDE}]"},
            "aspect_name": {"type": "string", "pattern": ASPECT_NAME, "maxLength": MAX_NAME,
                            "not": {"const": BUNDLE},
                            "description": f"an aspect name: letters, digits, '_', '.', '-' (e.g. 9x16), with no "
                                           f"'..' and no trailing '.' or '.lock' (each name becomes part of a git "
                                           f"tag), not {BUNDLE!r} (the file that holds every aspect), at most "
                                           f"{MAX_NAME} of them"},
            "preset": {"enum": list(PRESETS),
                       "description": f"a Depth Anything 3 preset the farm converts: {', '.join(PRESETS)} (the "
                                      f"package's others, {', '.join(NOT_CONVERTED)}, differ in structure from what "
                                      f"the rewrites cover: da3_litert_farm/core/models.py says how)"},
            "output_kind": {"enum": sorted({o["kind"] for o in OUTPUTS.values()}),
                            "description": "what a file's output is (core.models.OUTPUTS)"},
            "gpu_mode": {"enum": list(APP_MODES)},
            "gpu_modes": {"type": "array", "items": {"$ref": "#/$defs/gpu_mode"}, "uniqueItems": True,
                          "contains": {"const": DEFAULT_MODE},
                          "description": f"a list of GPU modes from {list(APP_MODES)} that holds {DEFAULT_MODE!r} "
                                         f"(the runtime's default, what an app gets unless it asks)"},
            "photo": {"enum": list(PHOTOS)},
            "photos": {"type": "array", "items": {"$ref": "#/$defs/photo"}, "minItems": MIN_PHOTOS,
                       "uniqueItems": True,
                       "description": f"a list of at least {MIN_PHOTOS} distinct photos from {list(PHOTOS)}"},
            "gpu_photos": {"type": "array", "items": {"$ref": "#/$defs/photo"}, "minItems": 1, "uniqueItems": True,
                           "description": "a list of at least 1 distinct photo from validation.photos"},
            "photo_scores": {"type": "object", "propertyNames": {"$ref": "#/$defs/photo"},
                             "minProperties": MIN_PHOTOS, "additionalProperties": {"type": "number"}},
            "gpu_photo_scores": {"type": "object", "propertyNames": {"$ref": "#/$defs/photo"},
                                 "minProperties": 1, "additionalProperties": {"type": "number"}},
        },
    }


def _finite_number(checker, value) -> bool:
    # an int is finite however large (math.isfinite would overflow converting it to a float)
    return jsonschema.Draft202012Validator.TYPE_CHECKER.is_type(value, "number") and (
        isinstance(value, int) or math.isfinite(value))


def _plain_integer(checker, value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pattern(validator, pattern, instance, schema):
    """JSON Schema's regexes are ECMA-262's, whose `$` ends the text; Python's `$` also matches before a final
    newline, which would pass "0.1.0\\n" as a version (and a git tag)."""
    if validator.is_type(instance, "string") and not re.search(re.sub(r"(?<!\\)\$", r"\\Z", pattern), instance):
        yield jsonschema.ValidationError(f"{_shown(instance)} does not match {pattern!r}")


# JSON has no NaN or infinity, and YAML's 896.0 is not a pixel count: "number" is finite, "integer" an int.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"number": _finite_number, "integer": _plain_integer}),
)


@functools.cache
def _registry() -> Registry:
    resources = (load_schema(), constants_schema())
    return Registry().with_resources((r["$id"], DRAFT202012.create_resource(r)) for r in resources)


def validator_for(schema: dict):
    """A Draft 2020-12 validator of `schema` that resolves params.schema.json and constants.schema.json."""
    return _Validator(schema, registry=_registry())


_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


def _shown(value: object, limit: int = 80) -> str:
    """A value as a message quotes it: its repr, cut short (a message names the problem, not the whole input)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def _message(error: jsonschema.ValidationError) -> str:
    return _clip(_schema_message(error))


def _schema_message(error: jsonschema.ValidationError) -> str:
    """A schema error as `<key path>: <value> <what is wrong>; what is allowed`."""
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{_clip(str(p), 80)}" for p in error.absolute_path).lstrip(".")
    where = where or "top level"
    schema, value = error.schema, error.instance
    if error.validator == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        unknown = sorted((_shown(k) for k in value if k not in allowed))
        return f"{where}: unknown key(s) [{', '.join(unknown)}]; allowed: {allowed}"
    if error.validator == "required":
        return f"{where}: missing key(s) {[k for k in schema['required'] if k not in value]}"
    if error.validator == "enum" and "description" not in schema:
        return f"{where}: {_shown(value)} is not one of {schema['enum']}"
    allowed = _allowed(schema)
    if allowed is None:
        return f"{where}: {error.message}"
    if "propertyNames" in error.absolute_schema_path:
        return f"{where}: key {_shown(value)} must be {allowed}"
    if error.validator == "multipleOf":
        return f"{where}: {_shown(value)} is not a multiple of {schema['multipleOf']}; must be {allowed}"
    return f"{where}: {_shown(value)} must be {allowed}"


def _allowed(schema: dict) -> str | None:
    """What a (sub)schema allows, in words: its description, else its type."""
    kind = schema.get("type")
    if "description" in schema:
        return schema["description"]
    if kind == "object" and "properties" in schema:
        return f"a mapping with keys {list(schema['properties'])}"
    if kind is not None:
        return " or ".join(_TYPE_WORDS[k] for k in ([kind] if isinstance(kind, str) else kind))
    return None


# --- what a schema cannot say ---

def _aspects(raw: dict, long_side: int) -> dict[str, Aspect]:
    aspects: dict[str, Aspect] = {}
    by_shape: dict[tuple[int, int], str] = {}
    for name, entry in raw.items():
        aspect = plan_aspect(name, entry, long_side)
        key = (aspect.height, aspect.width)
        if key in by_shape:
            raise ParamsError(
                f"aspects.{aspect.name} and aspects.{by_shape[key]} both give {aspect.shape} "
                f"(HxW): each shape is built once; remove one or change its ratio/size"
            )
        by_shape[key] = aspect.name
        aspects[aspect.name] = aspect
    return aspects


def _checkpoint(c: dict, base_dir: Path, check_files: bool = True) -> CheckpointParams:
    source, path, outliers = c["source"], c.get("path"), c.get("outliers", False)
    if source == "local":
        if not path:
            raise ParamsError("checkpoint.path: source 'local' needs a directory holding "
                              f"{' + '.join(HUB_FILES)}")
        directory = (base_dir / path)
        missing = [f for f in HUB_FILES if not (directory / f).is_file()] if check_files else []
        if missing:
            raise ParamsError(f"checkpoint.path: {path!r} lacks {missing}; a local checkpoint is a "
                              f"directory in the Hub layout ({' + '.join(HUB_FILES)})")
    if outliers and source != "random":
        raise ParamsError(f"checkpoint.outliers: true plants outliers in stress weights; it needs source: random, "
                          f"not {source!r}")
    name = c.get("preset", DEFAULT_PRESET)
    repo = c.get("repo", PRESETS[name].repo)
    holds = {p.repo: p.name for p in PRESETS.values()}.get(repo)
    if source == "hub" and holds not in (None, name):
        raise ParamsError(f"checkpoint.repo: {repo} holds {holds}, not checkpoint.preset {name}; set "
                          f"checkpoint.repo: {PRESETS[name].repo} (or leave it out: it defaults to the preset's)")
    return CheckpointParams(source, name, repo,
                            c.get("revision", "main"), path, c.get("seed", 0), outliers)


def _check_tensor_plan(model: Preset, max_tensor_mib: int, aspects: dict[str, Aspect]) -> None:
    """Every aspect's largest GPU tensor is under max_tensor_mib (attention chunked)."""
    for aspect in aspects.values():
        plan = plan_tensors(model, aspect.height, aspect.width, max_tensor_mib * MIB)
        if plan.largest_bytes > max_tensor_mib * MIB:
            raise ParamsError(
                f"aspects.{aspect.name}: {aspect.shape} needs a {plan.largest_name} tensor of "
                f"{plan.largest_bytes / MIB:.0f} MiB in FP16, over max_tensor_mib {max_tensor_mib} even with "
                f"attention chunked over queries; choose a smaller long_side or raise max_tensor_mib "
                f"(only if every target GPU binds buffers that large)"
            )


def write_checked(params: Params) -> None:
    """The `params` stage's outputs: what each aspect's chain and the checkpoint stage were checked to read."""
    with fileio.atomic_dir(paths.CHECKED_PARAMS) as tmp:
        fileio.write_json(tmp / paths.CHECKED_CHECKPOINT.name, asdict(params.checkpoint))
        for a in params.aspects.values():
            fileio.write_json(tmp / paths.checked_aspect(a.name).name,
                              {"aspect": a.name, "ratio": a.ratio, "height": a.height, "width": a.width,
                               "max_tensor_mib": params.max_tensor_mib})
