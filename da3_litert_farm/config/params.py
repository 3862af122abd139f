"""The one loader of params.yaml: parse, check everything cheap, return typed settings.

Every stage calls `load_params()` first, so a bad params.yaml fails in well under a second,
before any model loads and before any output is touched. Each error names the key, the
offending value and what is allowed.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from da3_litert_farm.core import fileio, paths
from da3_litert_farm.core.aspects import Aspect, AspectError, check_long_side, plan_aspect
from da3_litert_farm.core.gpu_memory import MAX_TENSOR_MIB, MIB, MIN_TENSOR_MIB, plan_tensors
from da3_litert_farm.core.photos import MIN_PHOTOS, PHOTOS

PARAMS_FILE = Path("params.yaml")
SOURCES = ("hub", "local", "random")
HUB_FILES = ("config.json", "model.safetensors")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$")

_TOP_KEYS = ("checkpoint", "long_side", "max_tensor_mib", "aspects", "validation", "catalog")
_CHECKPOINT_KEYS = ("source", "repo", "revision", "path", "seed", "outliers")
_VALIDATION_KEYS = ("min_pearson", "max_mean_rel", "gpu", "gpu_min_pearson", "gpu_max_mean_rel", "photos")
GPU_CHECK = ("required", "skip")
_CATALOG_KEYS = ("name", "version")


class ParamsError(ValueError):
    """params.yaml is invalid; the message names the key and what is allowed."""


@dataclass(frozen=True)
class CheckpointParams:
    source: str
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

    def aspect(self, name: str) -> Aspect:
        if name not in self.aspects:
            raise ParamsError(f"aspect {name!r} is not in params.yaml; configured: {sorted(self.aspects)}")
        return self.aspects[name]


def load_params(path: Path | str = PARAMS_FILE, checkpoint_files: bool = True) -> Params:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ParamsError(f"{path} not found: run from the repository root") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path} is not valid YAML: {exc}") from None
    return parse_params(raw, base_dir=path.resolve().parent, checkpoint_files=checkpoint_files)


def parse_params(raw: object, base_dir: Path = Path("."), checkpoint_files: bool = True) -> Params:
    """Validate a parsed params.yaml document; relative paths resolve against base_dir.

    checkpoint_files=False skips checking that a local checkpoint's files exist: the
    per-aspect stages read the weights from artifacts/checkpoint, and a parallel build's
    workers have that, not the local checkpoint.
    """
    top = _mapping("top level", raw, _TOP_KEYS, required=_TOP_KEYS)
    try:
        long_side = check_long_side(top["long_side"])
        aspects = _aspects(top["aspects"], long_side)
    except AspectError as exc:
        raise ParamsError(str(exc)) from None
    max_tensor_mib = _max_tensor_mib(top["max_tensor_mib"], aspects)
    return Params(
        checkpoint=_checkpoint(top["checkpoint"], base_dir, checkpoint_files),
        long_side=long_side,
        max_tensor_mib=max_tensor_mib,
        aspects=aspects,
        validation=_validation(top["validation"]),
        catalog=_catalog(top["catalog"]),
    )


def _mapping(where: str, value: object, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(value, dict):
        raise ParamsError(f"{where}: expected a mapping with keys {list(allowed)}, got {value!r}")
    unknown = sorted(set(value) - set(allowed), key=str)
    if unknown:
        raise ParamsError(f"{where}: unknown key(s) {unknown}; allowed: {list(allowed)}")
    missing = [k for k in required if k not in value]
    if missing:
        raise ParamsError(f"{where}: missing key(s) {missing}")
    return value


def _aspects(raw: object, long_side: int) -> dict[str, Aspect]:
    if not isinstance(raw, dict) or not raw:
        raise ParamsError('aspects: expected at least one entry, e.g. 9x16: {ratio: "9:16"}')
    aspects: dict[str, Aspect] = {}
    by_shape: dict[tuple[int, int], str] = {}
    for name, entry in raw.items():
        aspect = plan_aspect(str(name) if isinstance(name, int) else name, entry, long_side)
        key = (aspect.height, aspect.width)
        if key in by_shape:
            raise ParamsError(
                f"aspects.{aspect.name} and aspects.{by_shape[key]} both give {aspect.shape} "
                f"(HxW): each shape is built once; remove one or change its ratio/size"
            )
        by_shape[key] = aspect.name
        aspects[aspect.name] = aspect
    return aspects


def _checkpoint(raw: object, base_dir: Path, check_files: bool = True) -> CheckpointParams:
    c = _mapping("checkpoint", raw, _CHECKPOINT_KEYS, required=("source",))
    source = c["source"]
    if source not in SOURCES:
        raise ParamsError(f"checkpoint.source: {source!r} is not one of {list(SOURCES)}")
    repo, revision = c.get("repo", "depth-anything/DA3-SMALL"), c.get("revision", "main")
    if source == "hub":
        if not isinstance(repo, str) or repo.count("/") != 1:
            raise ParamsError(f"checkpoint.repo: {repo!r} is not a Hub repo id like 'depth-anything/DA3-SMALL'")
        if not isinstance(revision, str) or not revision:
            raise ParamsError(f"checkpoint.revision: {revision!r} must be a branch, tag or commit hash")
    path = c.get("path")
    if source == "local":
        if not isinstance(path, str) or not path:
            raise ParamsError("checkpoint.path: source 'local' needs a directory holding "
                              f"{' + '.join(HUB_FILES)}")
        directory = (base_dir / path)
        missing = [f for f in HUB_FILES if not (directory / f).is_file()] if check_files else []
        if missing:
            raise ParamsError(f"checkpoint.path: {path!r} lacks {missing}; a local checkpoint is a "
                              f"directory in the Hub layout ({' + '.join(HUB_FILES)})")
    seed = c.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ParamsError(f"checkpoint.seed: {seed!r} must be a non-negative integer")
    outliers = c.get("outliers", False)
    if not isinstance(outliers, bool):
        raise ParamsError(f"checkpoint.outliers: {outliers!r} must be true or false")
    if outliers and source != "random":
        raise ParamsError(f"checkpoint.outliers: true plants outliers in stress weights; it needs source: random, "
                          f"not {source!r}")
    return CheckpointParams(source, str(repo), str(revision), path, seed, outliers)


def _fraction(key: str, value: object, low_open: float = 0.0, high: float = 1.0) -> float:
    """A number in (low_open, high]; the error names the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low_open < value <= high:
        raise ParamsError(f"{key}: {value!r} must be a number in ({low_open:g}, {high:g}]")
    return float(value)


def _validation(raw: object) -> ValidationParams:
    v = _mapping("validation", raw, _VALIDATION_KEYS, required=_VALIDATION_KEYS[:-1])
    gpu = v["gpu"]
    if gpu not in GPU_CHECK:
        raise ParamsError(f"validation.gpu: {gpu!r} is not one of {list(GPU_CHECK)}")
    photos = v.get("photos", list(PHOTOS))
    if not isinstance(photos, list) or len(photos) < MIN_PHOTOS:
        raise ParamsError(f"validation.photos: need a list of at least {MIN_PHOTOS} photos from {list(PHOTOS)}")
    unknown = [p for p in photos if p not in PHOTOS]
    if unknown or len(set(photos)) != len(photos):
        raise ParamsError(f"validation.photos: {unknown or 'duplicates'} not valid; choose distinct names "
                          f"from {list(PHOTOS)}")
    return ValidationParams(
        min_pearson=_fraction("validation.min_pearson", v["min_pearson"]),
        max_mean_rel=_fraction("validation.max_mean_rel", v["max_mean_rel"]),
        gpu=gpu,
        gpu_min_pearson=_fraction("validation.gpu_min_pearson", v["gpu_min_pearson"]),
        gpu_max_mean_rel=_fraction("validation.gpu_max_mean_rel", v["gpu_max_mean_rel"]),
        photos=tuple(photos),
    )


def _max_tensor_mib(raw: object, aspects: dict[str, Aspect]) -> int:
    """The GPU tensor limit, and every aspect's largest tensor under it (attention chunked)."""
    if isinstance(raw, bool) or not isinstance(raw, int) or not MIN_TENSOR_MIB <= raw <= MAX_TENSOR_MIB:
        raise ParamsError(f"max_tensor_mib: {raw!r} must be an integer in [{MIN_TENSOR_MIB}, {MAX_TENSOR_MIB}] "
                          "(MiB of the largest FP16 tensor the GPU may hold; WebGPU's default storage-buffer "
                          "binding limit is 128)")
    for aspect in aspects.values():
        plan = plan_tensors(aspect.height, aspect.width, raw * MIB)
        if plan.largest_bytes > raw * MIB:
            raise ParamsError(
                f"aspects.{aspect.name}: {aspect.shape} needs a {plan.largest_name} tensor of "
                f"{plan.largest_bytes / MIB:.0f} MiB in FP16, over max_tensor_mib {raw} even with attention "
                f"chunked over queries; choose a smaller long_side or raise max_tensor_mib "
                f"(only if every target GPU binds buffers that large)"
            )
    return raw


def _catalog(raw: object) -> CatalogParams:
    c = _mapping("catalog", raw, _CATALOG_KEYS, required=_CATALOG_KEYS)
    name, version = c["name"], c["version"]
    if not isinstance(name, str) or not re.match(r"^[a-z0-9][a-z0-9._-]*$", name):
        raise ParamsError(f"catalog.name: {name!r} must be lowercase letters, digits, '.', '_', '-'")
    if not isinstance(version, str) or not SEMVER.match(version):
        raise ParamsError(f"catalog.version: {version!r} is not a semantic version like \"0.1.0\" "
                          "(quote it in YAML)")
    return CatalogParams(name, version)


def write_checked(params: Params) -> None:
    """The `params` stage's outputs: what each aspect's chain and the checkpoint stage were checked to read."""
    with fileio.atomic_dir(paths.CHECKED_PARAMS) as tmp:
        fileio.write_json(tmp / paths.CHECKED_CHECKPOINT.name, asdict(params.checkpoint))
        for a in params.aspects.values():
            fileio.write_json(tmp / paths.checked_aspect(a.name).name,
                              {"aspect": a.name, "ratio": a.ratio, "height": a.height, "width": a.width,
                               "max_tensor_mib": params.max_tensor_mib})
