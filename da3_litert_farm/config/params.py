"""The one loader of params.yaml: parse, check everything cheap, return typed settings.

Every stage calls `load_params()` first, so a bad params.yaml fails in well under a second,
before any model loads and before any output is touched. Each error names the key, the
offending value and what is allowed.

Keys, types, enums, ranges and patterns are in params.schema.json (JSON Schema 2020-12);
this module adds what a schema cannot say: the cells (model x tier x aspect, core.cells) and
their shapes, the GPU tensor plan, a local checkpoint's files and rules across fields. The values owned by Python
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
from da3_litert_farm.core.cells import MAX_MODEL_NAME, MODEL_NAME, NPU_MARK, Cell
from da3_litert_farm.core.gpu_modes import APP_MODES, DEFAULT_MODE
from da3_litert_farm.core.npu_targets import QUALCOMM, simulable
from da3_litert_farm.core.models import DEFAULT_PRESET, NOT_CONVERTED, OUTPUTS, PRESETS, Preset
from da3_litert_farm.core.tensor_plan import MIB, plan_tensors
from da3_litert_farm.core.photos import MIN_PHOTOS, PHOTOS

PARAMS_FILE = Path("params.yaml")
SCHEMA_FILE = Path(__file__).with_name("params.schema.json")
SCHEMA_BASE = "https://github.com/da3-litert-farm/"  # the $id of both schemas, less the file name
HUB_FILES = ("config.json", "model.safetensors")
MAX_NAME = 64  # characters of an aspect or catalog name: each becomes part of file names and git tags
MAX_DEPTH = 16  # levels of nesting in params.yaml (it has 4): deeper is not a params file


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
    gpu_modes: tuple[str, ...]  # core.gpu_modes: the GPU check runs the file in each, each gated
    gpu_mode_gates: tuple[tuple[str, float, float], ...]  # (mode, min_pearson, max_mean_rel) where not the above

    def gpu_gates(self, mode: str) -> tuple[float, float, tuple[str, str]]:
        """(min Pearson, max mean relative error, the params keys that set them) of a GPU mode."""
        for name, min_pearson, max_mean_rel in self.gpu_mode_gates:
            if name == mode:
                key = f"validation.gpu_mode_gates.{mode}"
                return min_pearson, max_mean_rel, (f"{key}.min_pearson", f"{key}.max_mean_rel")
        return self.gpu_min_pearson, self.gpu_max_mean_rel, ("validation.gpu_min_pearson", "validation.gpu_max_mean_rel")


@dataclass(frozen=True)
class NpuParams:
    targets: tuple[str, ...]  # Qualcomm chips (core.npu_targets) each cell is compiled for; () builds none
    simulate: tuple[str, ...]  # those whose compiled file runs on the HTP simulator, gated by:
    gate_min_pearson: float  # npu.min_pearson (named apart from validation's, which DVC tracks key by key)
    gate_max_mean_rel: float  # npu.max_mean_rel
    simulate_tier: int | None = None  # cells above this tier are simulated through a proxy at it (checks.npu_proxy)


@dataclass(frozen=True)
class CatalogParams:
    name: str
    version: str


@dataclass(frozen=True)
class Params:
    models: dict[str, CheckpointParams]  # model name -> where its weights come from
    tiers: tuple[int, ...]  # long sides
    max_tensor_mib: int
    aspects: tuple[str, ...]  # the names of params.yaml's aspects, in its order
    cells: dict[str, Cell]  # every model x tier x aspect, by cell name, models outermost
    validation: ValidationParams
    npu: NpuParams
    catalog: CatalogParams

    def preset(self, model: str) -> Preset:
        return PRESETS[self.models[model].preset]

    def cell(self, name: str) -> Cell:
        if name not in self.cells:
            raise ParamsError(f"cell {name!r} is not in params.yaml's matrix (MODEL-TIER-ASPECT); configured: "
                              f"{list(self.cells)}")
        return self.cells[name]

    def model(self, name: str) -> str:
        if name not in self.models:
            raise ParamsError(f"model {name!r} is not in params.yaml; configured: {list(self.models)}")
        return name

    def bundle(self, name: str) -> list[Cell]:
        bundles = self.bundles()
        if name not in bundles:
            raise ParamsError(f"bundle {name!r} is not in params.yaml's matrix (MODEL-TIER); configured: "
                              f"{list(bundles)}")
        return bundles[name]

    def bundles(self) -> dict[str, list[Cell]]:
        """Bundle name (MODEL-TIER) -> its cells, one per aspect."""
        grouped: dict[str, list[Cell]] = {}
        for cell in self.cells.values():
            grouped.setdefault(cell.bundle, []).append(cell)
        return grouped


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
    if isinstance(raw, dict):
        # YAML reads a key such as 169 as a number; a model or aspect name is the text written.
        raw = {**raw, **{k: {str(n): v for n, v in raw[k].items()} for k in ("models", "aspects")
                         if isinstance(raw.get(k), dict)}}
    error = jsonschema.exceptions.best_match(validator_for(load_schema()).iter_errors(raw))
    if error is not None:
        raise ParamsError(_message(error))
    models = {name: _checkpoint(name, c, base_dir, checkpoint_files) for name, c in raw["models"].items()}
    tiers = tuple(raw["tiers"])
    try:
        cells = _cells(models, tiers, raw["aspects"])
    except AspectError as exc:
        raise ParamsError(str(exc)) from None
    if named := [a for a in raw["aspects"] if NPU_MARK in a]:
        raise ParamsError(f"aspects.{named[0]}: an aspect name may not hold {NPU_MARK!r}, which names a cell's NPU "
                          f"files among a catalog's (CELL{NPU_MARK}SOC, core.cells.npu_artifact)")
    _check_tensor_plan(raw["max_tensor_mib"], cells)
    v, c = raw["validation"], raw["catalog"]
    photos, gpu_photos = tuple(v["photos"]), tuple(v["gpu_photos"])
    if missing := [p for p in gpu_photos if p not in photos]:
        raise ParamsError(f"validation.gpu_photos: {missing} not in validation.photos {list(photos)}: the GPU stage "
                          f"compares with the official depth maps validate@ASPECT saves for validation.photos")
    gpu_modes, mode_gates = tuple(v["gpu_modes"]), v["gpu_mode_gates"]
    if unchecked := [m for m in mode_gates if m not in gpu_modes]:
        raise ParamsError(f"validation.gpu_mode_gates: {unchecked} not in validation.gpu_modes {list(gpu_modes)}: "
                          f"gates of a mode the GPU check does not run would never apply")
    if DEFAULT_MODE in mode_gates:
        raise ParamsError(f"validation.gpu_mode_gates: {DEFAULT_MODE!r} is gated by validation.gpu_min_pearson and "
                          f"validation.gpu_max_mean_rel; name only the other modes of validation.gpu_modes")
    npu = _npu(raw["npu"], cells)
    return Params(
        models=models,
        tiers=tiers,
        max_tensor_mib=raw["max_tensor_mib"],
        aspects=tuple(raw["aspects"]),
        cells=cells,
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
        npu=npu,
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
            "model_name": {"type": "string", "pattern": MODEL_NAME, "maxLength": MAX_MODEL_NAME,
                           "description": f"a model name: lowercase letters, digits and '_' (no '-': it separates "
                                          f"a cell's MODEL-TIER-ASPECT), at most {MAX_MODEL_NAME} of them, e.g. small"},
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
            "npu_target": {"enum": list(QUALCOMM),
                           "description": f"a Qualcomm chip LiteRT's compiler targets: {', '.join(QUALCOMM)}"},
            "npu_targets": {"type": "array", "items": {"$ref": "#/$defs/npu_target"}, "uniqueItems": True,
                            "description": f"a list of distinct Qualcomm chips from {list(QUALCOMM)}"},
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

def _cells(models: dict[str, CheckpointParams], tiers: tuple[int, ...], raw_aspects: dict) -> dict[str, Cell]:
    """Every model x tier x aspect (models outermost, then params.yaml's order), each aspect planned at the tier's
    long side; each shape built once per model."""
    planned = {tier: _aspects_at(tier, tiers, raw_aspects) for tier in tiers}
    cells = [Cell(model, checkpoint.preset, tier, aspect)
             for model, checkpoint in models.items() for tier in tiers for aspect in planned[tier]]
    return {c.name: c for c in cells}


def _aspects_at(tier: int, tiers: tuple[int, ...], raw_aspects: dict) -> list[Aspect]:
    aspects, by_shape = [], {}
    for name, entry in raw_aspects.items():
        aspect = plan_aspect(name, entry, tier)
        if "ratio" not in entry and (len(tiers) > 1 or aspect.long_side != tier):
            raise ParamsError(f"aspects.{name}: height and width fix one shape ({aspect.shape}), which "
                              f"tiers {list(tiers)} would each build: give it a ratio, or set tiers: "
                              f"[{aspect.long_side}] alone")
        if aspect.shape in by_shape:
            raise ParamsError(f"aspects.{name} and aspects.{by_shape[aspect.shape]} both give {aspect.shape} (HxW) at "
                              f"tier {tier}: each shape is built once; remove one or change its ratio/size")
        by_shape[aspect.shape] = name
        aspects.append(aspect)
    return aspects


def _checkpoint(model: str, c: dict, base_dir: Path, check_files: bool = True) -> CheckpointParams:
    where = f"models.{model}"
    source, path, outliers = c["source"], c.get("path"), c.get("outliers", False)
    if source == "local":
        if not path:
            raise ParamsError(f"{where}.path: source 'local' needs a directory holding {' + '.join(HUB_FILES)}")
        directory = (base_dir / path)
        missing = [f for f in HUB_FILES if not (directory / f).is_file()] if check_files else []
        if missing:
            raise ParamsError(f"{where}.path: {path!r} lacks {missing}; a local checkpoint is a "
                              f"directory in the Hub layout ({' + '.join(HUB_FILES)})")
    if outliers and source != "random":
        raise ParamsError(f"{where}.outliers: true plants outliers in stress weights; it needs source: random, "
                          f"not {source!r}")
    name = c.get("preset", DEFAULT_PRESET)
    repo = c.get("repo", PRESETS[name].repo)
    holds = {p.repo: p.name for p in PRESETS.values()}.get(repo)
    if source == "hub" and holds not in (None, name):
        raise ParamsError(f"{where}.repo: {repo} holds {holds}, not {where}.preset {name}; set "
                          f"{where}.repo: {PRESETS[name].repo} (or leave it out: it defaults to the preset's)")
    return CheckpointParams(source, name, repo,
                            c.get("revision", "main"), path, c.get("seed", 0), outliers)


def _npu(n: dict, cells: dict[str, Cell]) -> NpuParams:
    targets, simulate = tuple(n["targets"]), tuple(n["simulate"])
    if extra := [s for s in simulate if s not in targets]:
        raise ParamsError(f"npu.simulate: {extra} not in npu.targets {list(targets)}: the simulator runs the files "
                          f"the farm compiled")
    if unknown := [s for s in simulate if not simulable(s)]:
        raise ParamsError(f"npu.simulate: the farm does not know the SoC id and HTP arch of {unknown}, which the "
                          f"simulator must be told (core/npu_targets.py); simulate one of "
                          f"{[s for s in targets if simulable(s)]}")
    if targets and not simulate:
        raise ParamsError(f"npu.simulate: empty, so no compiled file would be checked; name at least one of "
                          f"npu.targets {list(targets)}")
    tier = n.get("simulate_tier")
    for cell in cells.values() if targets and tier is not None else ():
        if cell.tier > tier:
            try:
                cell.aspect.at_long_side(tier)
            except AspectError as exc:
                raise ParamsError(f"npu.simulate_tier: {tier} cannot be the simulator's proxy tier of cell {cell.name}: "
                                  f"{exc}; raise npu.simulate_tier or set it to null") from None
    return NpuParams(targets, simulate, gate_min_pearson=float(n["min_pearson"]),
                     gate_max_mean_rel=float(n["max_mean_rel"]), simulate_tier=tier)


def _check_tensor_plan(max_tensor_mib: int, cells: dict[str, Cell]) -> None:
    """Every cell's largest GPU tensor is under max_tensor_mib (attention chunked)."""
    for cell in cells.values():
        plan = plan_tensors(PRESETS[cell.preset], cell.height, cell.width, max_tensor_mib * MIB)
        if plan.largest_bytes > max_tensor_mib * MIB:
            raise ParamsError(
                f"aspects.{cell.aspect.name} at tier {cell.tier} for models.{cell.model} ({cell.preset}): "
                f"{cell.shape} needs a {plan.largest_name} tensor of {plan.largest_bytes / MIB:.0f} MiB in FP16, "
                f"over max_tensor_mib {max_tensor_mib} even with attention chunked over queries; choose a smaller "
                f"tier or raise max_tensor_mib (only if every target GPU binds buffers that large)"
            )


def write_checked(params: Params) -> None:
    """The `params` stage's outputs: what each model's checkpoint stage and each cell's chain were checked to read."""
    with fileio.atomic_dir(paths.CHECKED_PARAMS) as tmp:
        for folder in (paths.CHECKED_MODELS, paths.CHECKED_CELLS):
            (tmp / folder.relative_to(paths.CHECKED_PARAMS)).mkdir()
        for model, checkpoint in params.models.items():
            fileio.write_json(tmp / paths.checked_model(model).relative_to(paths.CHECKED_PARAMS),
                              asdict(checkpoint))
        for c in params.cells.values():
            fileio.write_json(tmp / paths.checked_cell(c.name).relative_to(paths.CHECKED_PARAMS),
                              {"cell": c.name, "model": c.model, "preset": c.preset, "tier": c.tier,
                               "aspect": c.aspect.name, "ratio": c.ratio, "height": c.height, "width": c.width,
                               "max_tensor_mib": params.max_tensor_mib})
