"""What the next `dvc repro` of params.yaml will cost, said before it runs; and the refusal of what this machine
cannot hold.

`python -m stages.params` prints each cell's GMAC, file MB, export peak memory, disk and minutes (config.cost_model's
estimates), then the totals of the stages the next `dvc repro` runs: a stage that dvc.lock records with the params
values params.yaml holds now counts as done. That is an approximation of `dvc status`, which is too slow to run here:
code edits and a changed local checkpoint are not seen, and a cell dropped and added back counts as new though the
run-cache restores it. Every cached output is counted twice, in the workspace and in DVC's cache (unless cache.type
links them); a rerun stage's new output only in the cache, the workspace's old one being replaced.

It refuses, naming the cell, the figure and the limit, a plan whose largest stage needs more memory than the machine
has, or whose new files need more than the free disk: a family farm filled its disk in its last stage, half an hour
in. FARM_IGNORE_COST=1 prints the plan and refuses nothing.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import yaml

from da3_litert_farm.config import cost_model
from da3_litert_farm.config.npu_plan import npu_plan
from da3_litert_farm.config.params import PARAMS_FILE, Params
from da3_litert_farm.core import host, paths
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.pipeline import GPU_STAGE, PER_CELL_STAGES, stage_name

IGNORE = "FARM_IGNORE_COST"
NPU_STAGE = "npu"  # its files go to artifacts/npu, outside the folder a bundle depends on
LEAVES = (NPU_STAGE, GPU_STAGE)  # per-cell stages no other per-cell stage depends on (dvc.yaml)
GB, GIB, MB = 1e9, 1 << 30, 1e6
_MISSING = object()


class CostError(FarmError):
    """A plan this machine cannot hold; the message names the cell, the figure, the limit and what to do."""


@dataclass(frozen=True)
class Machine:
    cpu: str
    memory: int  # bytes
    cache: Path  # DVC's cache folder
    links: bool  # cache.type links the workspace to the cache: one copy of each output, not two
    workspace_free: int
    cache_free: int
    one_disk: bool  # the workspace and the cache are on the same disk

    @classmethod
    def here(cls, root: Path = Path(".")) -> Machine:
        cache, kind = host.dvc_cache(root)
        return cls(cpu=host.cpu_name(), memory=host.memory_bytes(), cache=cache,
                   links=kind.split(",")[0].strip() in ("symlink", "hardlink"),
                   workspace_free=host.free_bytes(root), cache_free=host.free_bytes(cache),
                   one_disk=host.same_disk(root, cache))


@dataclass(frozen=True)
class CellCost:
    cell: Cell
    figures: dict[str, float]  # cost_model's: GMAC and its COLUMNS
    stage_mb: dict[str, float]  # per-cell stage -> the MB of the files it writes
    minutes: dict[str, float]  # per-cell stage -> its estimated minutes, where recorded
    runs: tuple[str, ...]  # its stages the next dvc repro runs
    listed: tuple[str, ...]  # its stages dvc.lock lists at all (their outputs exist: a rerun replaces them)


@dataclass(frozen=True)
class Plan:
    params: Params
    model: cost_model.CostModel
    machine: Machine
    cells: dict[str, CellCost]  # the cells of a recorded preset (or one alike)
    shared_mb: dict[str, float]  # checkpoint@MODEL and bundle@MODEL-TIER that run -> MB
    shared_listed: frozenset[str]

    def copies(self, stage: str, listed) -> tuple[int, int]:
        """(workspace, cache) copies a run of `stage` adds."""
        return (0 if self.machine.links or stage in listed else 1), 1

    def new_bytes(self) -> tuple[float, float]:
        """(workspace, cache) bytes the plan adds."""
        work = cache = 0.0
        for c in self.cells.values():
            for stage in c.runs:
                w, k = self.copies(stage, c.listed)
                work, cache = work + w * c.stage_mb[stage] * MB, cache + k * c.stage_mb[stage] * MB
        for stage, mb in self.shared_mb.items():
            w, k = self.copies(stage, self.shared_listed)
            work, cache = work + w * mb * MB, cache + k * mb * MB
        return work, cache

    def footprint(self, c: CellCost) -> float:
        """Bytes the cell's files take, in the workspace and the cache."""
        return sum(c.stage_mb.values()) * MB * (1 if self.machine.links else 2)

    def peak(self) -> CellCost | None:
        """The cell whose export, the largest stage recorded, peaks highest among those that run."""
        exporting = [c for c in self.cells.values() if "export" in c.runs]
        return max(exporting, key=lambda c: c.figures["export peak RSS MiB"], default=None)

    def refusal(self) -> str | None:
        """Why this machine cannot build the plan, in one line; None where it can."""
        m, why = self.machine, []
        peak = self.peak()
        if peak is not None and peak.figures["export peak RSS MiB"] * (1 << 20) > m.memory:
            c = peak.cell
            why.append(f"export@{c.name} ({c.preset} at {c.height} x {c.width}) needs about "
                       f"{peak.figures['export peak RSS MiB'] / 1024:.1f} GiB of memory (estimated from "
                       f"{self.model.source}), more than this machine's {m.memory / GIB:.1f} GiB: drop "
                       f"{self._over_memory()} from params.yaml, or build on a larger machine")
        work, cache = self.new_bytes()
        disks = ([("the workspace and the DVC cache", work + cache, m.workspace_free)] if m.one_disk else
                 [("the workspace", work, m.workspace_free), (f"the DVC cache ({m.cache})", cache, m.cache_free)])
        largest = max((c for c in self.cells.values() if c.runs), key=self.footprint, default=None)
        most = f" (the largest cell, {largest.cell.name}, {self.footprint(largest) / GB:.1f} GB)" if largest else ""
        for where, need, free in disks:
            if need > free:
                why.append(f"the next dvc repro writes about {need / GB:.1f} GB to the disk holding {where}{most}, "
                           f"more than its {free / GB:.1f} GB free: free disk (`dvc gc --workspace` drops what the "
                           f"cache holds for no checkout), move the DVC cache to a roomier disk (`dvc cache dir`) "
                           f"or drop a tier, preset or aspect from params.yaml")
        return "; and ".join(why) + f". Set {IGNORE}=1 to build anyway" if why else None

    def _over_memory(self) -> str:
        """What to drop to fit the memory: a model where each of its exports is over (a preset's export peak
        hardly depends on the shape), else the cells that are, by their tier or aspect."""
        exporting = [c for c in self.cells.values() if "export" in c.runs]
        over = {c.cell.name for c in exporting if c.figures["export peak RSS MiB"] * (1 << 20) > self.machine.memory}
        drops = []
        for model in dict.fromkeys(c.cell.model for c in exporting if c.cell.name in over):
            own = [c.cell for c in exporting if c.cell.model == model]
            if all(c.name in over for c in own):
                drops.append(f"model {model} ({own[0].preset})")
            else:
                drops.append(f"the tier or aspect of {', '.join(c.name for c in own if c.name in over)}")
        return " and ".join(drops)

    def lines(self) -> list[str]:
        return _lines(self)


def plan(params: Params, root: Path = Path("."), machine: Machine | None = None,
         figures: Path = cost_model.FIGURES) -> Plan | str:
    """The plan of the next `dvc repro` in the repository at `root`, or why there is none (no recording)."""
    try:
        model = cost_model.load(figures)
    except (OSError, ValueError, KeyError) as exc:
        return f"cost: no estimate: {cost_model.FAMILY} and {cost_model.BENCH} not both readable in {figures} ({exc})"
    lock = _yaml(root / paths.LOCK_FILE)
    listed = set(lock.get("stages") or {})
    runs = _to_run(params, _done(lock, _yaml(root / PARAMS_FILE)))
    cells = {c.name: _cell_cost(c, fit.at(c.height, c.width), model, params, runs, listed)
             for c in params.cells.values() if (fit := model.preset(c.preset))}
    shared = {}
    for m in params.models:
        own = [c for c in cells.values() if c.cell.model == m]
        if stage_name("checkpoint", m) in runs and own:  # the checkpoint: the model's FP32 weights, as its export
            shared[stage_name("checkpoint", m)] = max(c.stage_mb["export"] for c in own)
    for bundle, members in params.bundles().items():
        own = [cells[c.name] for c in members if c.name in cells]
        if stage_name("bundle", bundle) in runs and own:
            shared[stage_name("bundle", bundle)] = max(c.stage_mb["quantize"] for c in own) * model.bundle_per_largest
    return Plan(params, model, machine or Machine.here(root), cells, shared, frozenset(listed))


def enforce(p: Plan | str, env: Mapping[str, str]) -> None:
    """Raise CostError where the machine cannot hold the plan, unless env sets FARM_IGNORE_COST=1."""
    if isinstance(p, Plan) and (why := p.refusal()) and env.get(IGNORE) != "1":
        raise CostError(why)


def _cell_cost(c: Cell, figures: dict[str, float], model: cost_model.CostModel, params: Params, runs: set[str],
               listed: set[str]) -> CellCost:
    fp16 = figures["MB"]
    fp32 = fp16 * model.fp32_per_fp16
    npu = fp16 * model.npu_per_fp16 * len(params.npu.targets) if model.npu_per_fp16 else 0.0
    stage_mb = {"patch": fp32, "export": fp32, "quantize": fp16, "validate": 0.0, NPU_STAGE: npu, GPU_STAGE: 0.0}
    v = params.validation
    inferences = len(v.gpu_modes) * len(v.gpu_photos) if v.gpu == "required" else 0
    minutes = {"export": figures["export s"] / 60, GPU_STAGE: figures["GPU s"] * inferences / 60}
    mine = [stage_name(s, c.name) for s in PER_CELL_STAGES]
    return CellCost(c, figures, stage_mb, minutes,
                    runs=tuple(s for s, n in zip(PER_CELL_STAGES, mine) if n in runs),
                    listed=tuple(s for s, n in zip(PER_CELL_STAGES, mine) if n in listed))


_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT, _FLOAT, _BOOL = (f"tag:yaml.org,2002:{t}" for t in ("int", "float", "bool"))


class _Yaml12(_BASE):
    """YAML 1.2's scalars, as DVC reads params.yaml and writes dvc.lock: PyYAML's 1.1 reads an unquoted 9:16 as
    the base-60 integer 556, `yes` as true and 1e-4 as a string."""


_Yaml12.yaml_implicit_resolvers = {k: [(t, r) for t, r in v if t not in (_INT, _FLOAT, _BOOL)]
                                   for k, v in _BASE.yaml_implicit_resolvers.items()}
_Yaml12.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Yaml12.add_implicit_resolver(_INT, re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_Yaml12.add_implicit_resolver(_FLOAT, re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"
                                                 r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
                              list("-+0123456789."))


def _yaml(path: Path) -> dict:
    try:
        doc = yaml.load(path.read_bytes(), Loader=_Yaml12)
    except (OSError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _value(doc: object, dotted: str) -> object:
    """params.yaml's value at DVC's dotted key (a name may hold a dot: aspects.tall.v2)."""
    if not isinstance(doc, dict):
        return _MISSING
    if dotted in doc:
        return doc[dotted]
    for i, char in enumerate(dotted):
        if char == "." and dotted[:i] in doc:
            found = _value(doc[dotted[:i]], dotted[i + 1:])
            if found is not _MISSING:
                return found
    return _MISSING


def _done(lock: dict, raw: dict) -> set[str]:
    """The stages dvc.lock records with the params values params.yaml holds now."""
    done = set()
    for name, entry in (lock.get("stages") or {}).items():
        values = ((entry or {}).get("params") or {}).get(str(PARAMS_FILE)) or {}
        if all(_value(raw, key) == value for key, value in values.items()):
            done.add(name)
    return done


def _to_run(params: Params, done: set[str]) -> set[str]:
    """The checkpoint, per-cell and bundle stages the next dvc repro runs: those not done, and what follows them."""
    runs = {stage_name("checkpoint", m) for m in params.models if stage_name("checkpoint", m) not in done}
    for c in params.cells.values():
        upstream = stage_name("checkpoint", c.model) in runs
        for stage in PER_CELL_STAGES:
            if upstream or stage_name(stage, c.name) not in done:
                runs.add(stage_name(stage, c.name))
                upstream = upstream or stage not in LEAVES
    for bundle, members in params.bundles().items():
        if stage_name("bundle", bundle) not in done or any(
                stage_name(s, c.name) in runs for c in members for s in PER_CELL_STAGES if s != NPU_STAGE):
            runs.add(stage_name("bundle", bundle))
    return runs


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _n(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def _lines(p: Plan) -> list[str]:
    m, params = p.machine, p.params
    lines = [f"cost: estimated from {p.model.source}; minutes are that machine's, this one is {m.cpu}",
             f"cost: per preset GMAC = a T + b T^2 in the cell's patch tokens T, and file MB, export seconds and peak "
             f"memory, GPU seconds per inference as lines in GMAC; the FP32 flatbuffer, patched program, NPU and "
             f"bundle files as ratios to the FP16 file ({cost_model.BENCH}, {cost_model.NPU}, the family's bundles)"]
    for preset in dict.fromkeys(c.cell.preset for c in p.cells.values()):
        if (fit := p.model.preset(preset)).recorded != preset:
            lines.append(f"cost: {preset} is not recorded: estimated as {fit.recorded}, the same ViT")
    width = max([len(name) for name in p.cells] + [4])
    lines.append(f"{'cell':>{width}}  {'GMAC':>6}  {'file MB':>7}  {'export peak':>11}  {'disk':>7}  "
                 f"{'export':>7}  {'GPU check':>9}  next dvc repro")
    for c in p.cells.values():
        state = ("done" if not c.runs else "new" if not c.listed
                 else "reruns " + ", ".join(c.runs))
        lines.append(f"{c.cell.name:>{width}}  {_n(c.figures['GMAC']):>6}  {_n(c.figures['MB']):>7}  "
                     f"{c.figures['export peak RSS MiB'] / 1024:>7.1f} GiB  {p.footprint(c) / GB:>4.1f} GB  "
                     f"{c.minutes['export']:>3.1f} min  {c.minutes[GPU_STAGE]:>5.1f} min  {state}")
    missing = [c for c in params.cells.values() if c.name not in p.cells]
    if missing:
        lines.append(f"cost: no recording of {', '.join(sorted({c.preset for c in missing}))} or a preset alike: "
                     f"{len(missing)} cells not estimated, nor counted below")
    return lines + _totals(p)


def _totals(p: Plan) -> list[str]:
    params, m = p.params, p.machine
    running = [c for c in p.cells.values() if c.runs]
    if not running and not p.shared_mb:
        return ["plan: the next dvc repro builds nothing here: dvc.lock records every stage with params.yaml's values "
                "(a code edit is not seen: `dvc status` sees it)"]
    new = sum(not c.listed for c in running)
    lines = [f"plan: the next dvc repro runs stages of {len(running)} of {len(p.cells)} cells ({new} new, "
             f"{len(running) - new} rerun for a params edit); a stage counts as done where dvc.lock records it with "
             f"params.yaml's values (code edits and local checkpoints are not compared, `dvc status` does; a cell "
             f"the run-cache holds counts as new)"]
    export = sum(c.minutes["export"] for c in running if "export" in c.runs)
    gpu = sum(c.minutes[GPU_STAGE] for c in running if GPU_STAGE in c.runs)
    v = params.validation
    each = f"{_count(len(v.gpu_modes), 'mode')} x {_count(len(v.gpu_photos), 'photo')} each"
    lines.append(f"plan: time: exports {_n(export)} min, GPU checks {_n(gpu)} min "
                 f"({each if v.gpu == 'required' else 'validation.gpu: skip'}); patch, quantize, validate and bundle "
                 f"stages are not in the recording, not counted")
    npu_cells = {c.cell.name: c.cell for c in running if NPU_STAGE in c.runs}
    if params.npu.targets and len(npu_cells) == len(params.cells):
        lines.append("plan: NPU stage: every cell's, as the npu lines say")
    elif params.npu.targets and npu_cells:
        lines += [f"plan: {line}" for line in npu_plan(dataclasses.replace(params, cells=npu_cells))[1:]]
    work, cache = p.new_bytes()
    free = (f"{m.workspace_free / GB:.1f} GB free on the disk holding both" if m.one_disk else
            f"{m.workspace_free / GB:.1f} GB free for the workspace, {m.cache_free / GB:.1f} GB for the cache")
    lines.append(f"plan: disk: about {(work + cache) / GB:.1f} GB new, {work / GB:.1f} GB in the workspace and "
                 f"{cache / GB:.1f} GB in the DVC cache ({m.cache}{', linked: one copy' if m.links else ''}) of "
                 f"patched programs, FP32, FP16 and NPU files, bundles and checkpoints; {free}")
    peak = p.peak()
    if peak is not None:
        lines.append(f"plan: memory: the largest stage, export@{peak.cell.name}, about "
                     f"{peak.figures['export peak RSS MiB'] / 1024:.1f} GiB of this machine's {m.memory / GIB:.1f} GiB")
    return lines
