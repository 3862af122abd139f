"""The farm's matrix: one cell per model x tier x aspect of params.yaml, the unit every per-file stage builds.

A cell is named MODEL-TIER-ASPECT (e.g. small-896-9x16), as DVC's `matrix:` names its stages (patch@small-896-9x16).
Model names hold no '-' and tiers are digits, so a name splits back into its three parts whatever the aspect's name.
A bundle holds the cells of one model and tier (MODEL-TIER, e.g. small-896), a signature per aspect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from da3_litert_farm.core.aspects import BUNDLE, Aspect, Shape

MODEL_NAME = r"^[a-z0-9][a-z0-9_]*$"  # part of cell, file and git-tag names: no '-' (the cell name's separator)
MAX_MODEL_NAME = 32
NPU_MARK = "-npu-"  # no aspect name holds it, so no cell's name is another's NPU file
_CELL = re.compile(r"^([a-z0-9][a-z0-9_]*)-([0-9]+)-(.+)$")


class CellNameError(ValueError):
    """A name that is not MODEL-TIER-ASPECT."""


@dataclass(frozen=True)
class Cell:
    model: str  # a key of params.yaml's `models`
    preset: str  # that model's preset (core.models.PRESETS)
    tier: int  # the long side of `tiers` the aspect was planned at
    aspect: Aspect  # planned at the tier; aspect.name is its key in params.yaml's `aspects`

    @property
    def name(self) -> str:
        return cell_name(self.model, self.tier, self.aspect.name)

    @property
    def bundle(self) -> str:
        return bundle_name(self.model, self.tier)

    @property
    def shape(self) -> Shape:
        return self.aspect.shape

    @property
    def height(self) -> int:
        return self.aspect.height

    @property
    def width(self) -> int:
        return self.aspect.width

    @property
    def ratio(self) -> str:
        return self.aspect.ratio

    @property
    def long_side(self) -> int:
        return self.aspect.long_side

    def proxy_shape(self, simulate_tier: int | None) -> Shape | None:
        """The shape of this cell's proxy on the HTP simulator (npu.simulate_tier, checks.npu_proxy): None where the
        simulator runs the shipped file itself (no simulate_tier, or this cell's tier is not above it)."""
        if simulate_tier is None or self.tier <= simulate_tier:
            return None
        return self.aspect.at_long_side(simulate_tier).shape


def cell_name(model: str, tier: int, aspect: str) -> str:
    return f"{model}-{tier}-{aspect}"


def bundle_name(model: str, tier: int) -> str:
    return f"{model}-{tier}"


def bundle_artifact(bundle: str) -> str:
    """A bundle's name among a catalog's files (artifact names, git tags): MODEL-TIER-bundle, which no cell's name
    can be, since no aspect may be named `bundle` (core.aspects.BUNDLE)."""
    return f"{bundle}-{BUNDLE}"


def npu_artifact(cell: str, soc: str) -> str:
    """A cell's file compiled for a Qualcomm chip among a catalog's files (artifact names, git tags):
    CELL-npu-SOC, e.g. small-896-9x16-npu-sm8650."""
    return f"{cell}{NPU_MARK}{soc.lower()}"


def split_cell(name: str) -> tuple[str, int, str]:
    """MODEL-TIER-ASPECT -> (model, tier, aspect)."""
    match = _CELL.match(name)
    if match is None:
        raise CellNameError(f"{name!r} is not a cell name MODEL-TIER-ASPECT (e.g. small-896-9x16)")
    return match[1], int(match[2]), match[3]


def split_bundle(name: str) -> tuple[str, int]:
    """MODEL-TIER -> (model, tier)."""
    model, _, tier = name.partition("-")
    if not re.match(MODEL_NAME, model) or not tier.isdigit():
        raise CellNameError(f"{name!r} is not a bundle name MODEL-TIER (e.g. small-896)")
    return model, int(tier)
