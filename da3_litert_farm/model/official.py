"""The official, unpatched Depth Anything 3 model: construction, strict loading, depth forward.

Everything that validates the farm's output compares against `official_depth` on a model
built here, so this module must stay a thin shell over the `depth_anything_3` package.
"""

from __future__ import annotations

import json
import os
import struct

os.environ.setdefault("DA3_LOG_LEVEL", "WARN")  # the package logs every layer choice at INFO

from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from depth_anything_3.cfg import create_object, load_config  # noqa: E402
from depth_anything_3.model.da3 import DepthAnything3Net  # noqa: E402
from depth_anything_3.registry import MODEL_REGISTRY  # noqa: E402
from safetensors import SafetensorError, safe_open  # noqa: E402
from safetensors.torch import load_model, save_model  # noqa: E402
from torch import nn  # noqa: E402

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.models import PresetError, preset

# Hub checkpoints hold the network as `DepthAnything3.model`, so every key has this prefix.
HUB_KEY_PREFIX = "model."


class CheckpointError(FarmError, ValueError):
    """A checkpoint that cannot be loaded; the message says what is wrong and where."""


def build_official(model_name: str = "da3-small") -> DepthAnything3Net:
    """The official network for a preset the farm converts (core.models), randomly initialised, in eval mode."""
    try:
        preset(model_name)
    except PresetError as exc:
        raise CheckpointError(f"model_name: {exc}") from None
    return create_object(load_config(MODEL_REGISTRY[model_name])).eval()


class HubLayout(nn.Module):
    """The official net under the attribute `model`, as depth_anything_3.api.DepthAnything3
    holds it: its state_dict keys are exactly the Hub checkpoint's (`model.` prefix)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.model = net


def load_hub_weights(net: nn.Module, weights: Path | str) -> None:
    """Load a Hub model.safetensors into `net`; any missing, unexpected or misshapen key is an error.

    Uses safetensors' `load_model`, as the Hub mixin does, so tensors the official model
    shares (the aux head's LayerNorm, stored once) resolve the same way. A file that also
    stores the other names of a shared tensor (as `save_file(model.state_dict())` does) is
    accepted when each such alias holds the same values as the name that was loaded.
    """
    layout = HubLayout(net)
    try:
        missing, unexpected = load_model(layout, str(weights), strict=False)
    except RuntimeError as exc:  # size mismatches
        raise CheckpointError(f"{weights} does not match the official model: {exc}") from None
    except SafetensorError as exc:  # corrupt or not safetensors; a missing file (OSError) stays itself
        raise CheckpointError(f"{weights}: not a readable safetensors file: {_what_is_wrong(weights)} "
                              f"(safetensors: {exc})") from None
    unexpected = [k for k in unexpected if not _is_equal_alias(layout, weights, k)]
    if missing or unexpected:
        hint = ""
        if unexpected and not any(k.startswith(HUB_KEY_PREFIX) for k in unexpected):
            hint = f" (Hub checkpoints prefix every key with {HUB_KEY_PREFIX!r})"
        raise CheckpointError(
            f"{weights} does not match the official model{hint}: "
            f"missing keys ({len(missing)}): {sorted(missing)}; unexpected keys ({len(unexpected)}): {sorted(unexpected)}"
        )


def _what_is_wrong(weights: Path | str) -> str:
    """What the bytes of a file safetensors refused show: the format is an 8-byte little-endian
    header length, that many bytes of JSON (each tensor's data_offsets), then the tensor data."""
    size = os.path.getsize(weights)
    with open(weights, "rb") as f:
        if size < 8:
            return f"{size} bytes, shorter than the 8-byte header length every safetensors file starts with"
        (length,) = struct.unpack("<Q", f.read(8))
        if length > size - 8:
            return (f"its first 8 bytes give a header of {length} bytes but {size - 8} follow: "
                    f"not a safetensors file, or cut short within the header")
        try:
            header = json.loads(f.read(length))
            end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):  # any JSON but the expected
            return "its header is not the JSON a safetensors file holds"
    data = size - 8 - length
    if end > data:
        return (f"its header lists {end} bytes of tensor data but {data} follow it: cut short "
                f"(an interrupted download or copy?)")
    return f"its header and its {data} bytes of tensor data disagree"


def _is_equal_alias(layout: nn.Module, weights: Path | str, key: str) -> bool:
    """Whether `key` names a tensor the model shares with a key that was loaded, with equal values.

    Raises CheckpointError naming both keys when the file gives the shared tensor two values.
    """
    state = layout.state_dict(keep_vars=True)
    if key not in state:
        return False
    with safe_open(str(weights), framework="pt") as f:
        stored = set(f.keys())
        twins = [k for k, v in state.items() if k != key and k in stored and v is state[key]]
        if not twins:
            return False
        alias, kept = f.get_tensor(key), f.get_tensor(twins[0])
    if alias.shape != kept.shape or not torch.equal(alias, kept):
        raise CheckpointError(
            f"{weights}: {key} and {twins[0]} are one tensor in the official model (a tied module), "
            f"but the file stores different values under the two names; keep one, or make them equal"
        )
    return True


def save_hub_weights(net: nn.Module, weights: Path | str) -> None:
    """Write `net` as a Hub model.safetensors (shared tensors stored once, as the mixin does)."""
    save_model(HubLayout(net), str(weights), metadata={"format": "pt"})
    _sort_header(weights)


def _sort_header(weights: Path | str) -> None:
    """Sort the safetensors header in place, so that the same weights give the same bytes.

    safetensors writes its header from a Rust HashMap, in a new order on every write; the alias
    entries of shared tensors made the file, and its sha256 and DVC hash, change each time.
    The sorted header has the same length (padded with spaces, as the format allows), so the
    tensor data after it does not move.
    """
    with open(weights, "r+b") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.dumps(json.loads(f.read(length)), sort_keys=True, separators=(",", ":")).encode()
        if len(header) > length:
            raise RuntimeError(f"{weights}: the sorted safetensors header is longer than the original")
        f.seek(8)
        f.write(header.ljust(length))


@torch.no_grad()
def official_depth(model: DepthAnything3Net, image: torch.Tensor) -> torch.Tensor:
    """The official `depth` output for one normalized image [1,3,H,W] -> [1,1,H,W], in FP32.

    Runs the official forward unchanged (single view, no camera input), with autocast
    disabled so the reference is a true FP32 computation. A DPT head (the monocular series) runs
    with its sky head off, the package's own switch: the forward then returns the head's depth
    without the sky fill, a step that samples pixels at random (core.models.OUTPUTS).
    """
    sky_head = getattr(model.head, "use_sky_head", False)
    if sky_head:
        model.head.use_sky_head = False
    try:
        with torch.autocast(device_type=image.device.type, enabled=False):
            out = model(image.unsqueeze(1))  # the official API takes [B, S, 3, H, W]
    finally:
        if sky_head:
            model.head.use_sky_head = True
    return out["depth"].reshape(1, 1, *image.shape[-2:]).float()
