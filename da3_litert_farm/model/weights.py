"""Checkpoints in the Hugging Face Hub layout: read strictly, write, fingerprint.

A checkpoint directory holds config.json (`{"model_name": "da3-small"}`) and
model.safetensors whose keys carry the `model.` prefix, exactly as the Hub repo
depth-anything/DA3-SMALL ships them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from da3_litert_farm.core import fileio
from da3_litert_farm.model.official import CheckpointError, build_official, load_hub_weights, save_hub_weights
from da3_litert_farm.config.params import HUB_FILES

CONFIG_FILE, WEIGHTS_FILE = HUB_FILES


def read_model_name(directory: Path) -> str:
    config_path = directory / CONFIG_FILE
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{config_path}: cannot read the model config: {exc}") from None
    name = config.get("model_name") if isinstance(config, dict) else None
    if not isinstance(name, str):
        raise CheckpointError(f"{config_path}: no \"model_name\" (expected {{\"model_name\": \"da3-small\"}})")
    return name


def load_official_from_dir(directory: Path | str) -> torch.nn.Module:
    """The official model with the weights of a Hub-layout directory, loaded strictly."""
    directory = Path(directory)
    for f in HUB_FILES:
        if not (directory / f).is_file():
            raise CheckpointError(f"{directory} lacks {f}: a checkpoint directory holds {list(HUB_FILES)}")
    model = build_official(read_model_name(directory))
    load_hub_weights(model, directory / WEIGHTS_FILE)
    return model.eval()


def write_hub_layout(directory: Path | str, model: torch.nn.Module, model_name: str = "da3-small") -> None:
    """Write a model as a Hub-layout checkpoint directory (what `source: local` reads)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fileio.write_json(directory / CONFIG_FILE, {"model_name": model_name})
    with fileio.atomic_path(directory / WEIGHTS_FILE) as tmp:
        save_hub_weights(model, tmp)
