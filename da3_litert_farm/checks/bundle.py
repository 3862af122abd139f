"""The bundle's gates: each signature of the bundle is its single file, on the CPU and on the GPU.

Run by the DVC stage in stages/bundle.py. The bundle itself (every aspect's shipped file merged into
one .tflite, a signature per aspect, the FP16 weights stored once) is built by
da3_litert_farm.convert.tflite_bundle; `check_bundle` builds it from the verified files and passes
it through every gate (a failure names the aspect and the figure, and nothing is kept):
- structure: each signature's subgraph is its single file's (operators, tensor shapes and
  types, buffer bytes): what carries the single files' CPU and GPU checks over to the bundle;
- cpu: each signature's CPU output is bitwise its single file's, on the first validation photo;
- gpu: the bundle loads fully accelerated on the GPU accelerator, and the smallest aspect's
  signature returns bitwise what its single file returned in gpu@ (one GPU inference per
  build, not one per aspect);
- sharing: the bundle is at most the largest single file, plus every other aspect's shape
  part (its bytes that are not FP16 weights), plus 1 MB.
Also records what each aspect adds to the bundle and what loading it costs next to one
single file (da3_litert_farm.gpu.load_cost).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.gpu import load_cost
from da3_litert_farm.convert import tflite_bundle
from da3_litert_farm.checks.fidelity import TFLiteModel
from da3_litert_farm.gpu.gpu_runtime import GpuModel
from da3_litert_farm.config.params import Params
from da3_litert_farm.model.photo_input import cover_and_center_crop, load_photo, normalize
from da3_litert_farm.checks.shipped import Shipped, verified

SHARING_SLACK_BYTES = 1_000_000  # the bundle's own graph and metadata, and rounding


class BundleGateError(FarmError, RuntimeError):
    def __init__(self, failures: list[str]):
        super().__init__("; ".join(failures))
        self.failures = failures


def smallest(singles: list[Shipped]) -> Shipped:
    """The aspect whose GPU inference is cheapest: fewest pixels, then name."""
    return min(singles, key=lambda s: (s.aspect.height * s.aspect.width, s.aspect.name))


def photo_input(photo: str, s: Shipped) -> np.ndarray:
    return normalize(cover_and_center_crop(load_photo(photo), s.aspect.height, s.aspect.width))


def check_structure(bundle_file: Path, singles: list[Shipped]) -> list[str]:
    merged = tflite_bundle.read(bundle_file)
    return [f"aspect {s.aspect.name}: signature {s.aspect.name}'s subgraph differs from {s.file} "
            "(operators, tensors or buffer bytes)" for s in singles
            if tflite_bundle.subgraph_structure(merged, s.aspect.name)
            != tflite_bundle.subgraph_structure(tflite_bundle.read(s.file))]


def check_cpu(bundle_file: Path, singles: list[Shipped], photo: str) -> list[str]:
    failures = []
    for s in singles:
        image = photo_input(photo, s)
        ours, theirs = TFLiteModel(bundle_file, signature=s.aspect.name)(image), TFLiteModel(s.file)(image)
        if not np.array_equal(ours, theirs):
            failures.append(f"aspect {s.aspect.name}: CPU output of signature {s.aspect.name} differs from "
                            f"{s.file} on photo {photo!r} (max abs difference {np.abs(ours - theirs).max():.3g})")
    return failures


def check_gpu(bundle_file: Path, s: Shipped, photo: str) -> tuple[dict, list[str]]:
    """Load the bundle on the GPU accelerator; run the signature of `s` once, against gpu@'s output."""
    with np.load(paths.gpu_depth(s.aspect.name)) as maps:
        recorded = maps[photo]
    started = time.time()
    model = GpuModel(bundle_file, signature=s.aspect.name)
    record = {"checked": True, "adapter": str(model.adapter), "fully_accelerated": model.fully_accelerated,
              "precision": model.precision, "signature": s.aspect.name, "photo": photo}
    if not model.fully_accelerated:
        return record, [f"bundle: not fully accelerated on the GPU accelerator (rejected: {model.rejected_ops})"]
    ours = model(photo_input(photo, s))
    difference = float(np.abs(ours - recorded).max())
    record.update(bitwise_equal=bool(np.array_equal(ours, recorded)), max_abs_difference=difference,
                  seconds=round(time.time() - started, 1))
    failures = [] if record["bitwise_equal"] else [
        f"aspect {s.aspect.name}: GPU output of signature {s.aspect.name} differs from what gpu@{s.aspect.name} "
        f"recorded for {s.file} on photo {photo!r} (max abs difference {difference:.3g})"]
    return record, failures


def check_sharing(bundle_bytes: int, singles: list[Shipped], parts: dict[str, tflite_bundle.FileBytes],
                  own: dict[str, int]) -> tuple[dict, list[str]]:
    largest = max(singles, key=lambda s: (parts[s.aspect.name].total, s.aspect.name))
    others = sum(parts[s.aspect.name].shape_part for s in singles if s is not largest)
    limit = parts[largest.aspect.name].total + others + SHARING_SLACK_BYTES
    gate = {"limit": limit, "value": bundle_bytes, "passed": bundle_bytes <= limit}
    if gate["passed"]:
        return gate, []
    unshared = ", ".join(f"{a} adds {own[a] / 1e6:.1f} MB of its own" for a in own)
    return gate, [f"sharing: the bundle is {bundle_bytes / 1e6:.1f} MB, over {limit / 1e6:.1f} MB (the largest "
                  f"file, {largest.aspect.name}, {parts[largest.aspect.name].total / 1e6:.1f} MB, + the other "
                  f"aspects' shape parts {others / 1e6:.1f} MB + 1 MB): their weights are not shared ({unshared}); "
                  "were they all built from the same checkpoint?"]


def check_bundle(params: Params, out_dir: Path) -> dict:
    """Build the bundle of every verified aspect into `out_dir`, gate it, return its record;
    raise BundleGateError on any failure."""
    started = time.time()
    # In name order, the order of the bundle's signatures (and of the record's).
    singles = [verified(params.aspects[name]) for name in sorted(params.aspects)]
    built = tflite_bundle.build_bundle({s.aspect.name: s.file for s in singles}, out_dir)
    bundle_file, parts, own = built.file, built.parts, built.own
    photo = params.validation.gpu_photos[0]  # gpu@ recorded its GPU map
    failures = check_structure(bundle_file, singles) + check_cpu(bundle_file, singles, photo)
    sharing, sharing_failures = check_sharing(built.bytes, singles, parts, own)
    failures += sharing_failures
    reference = smallest(singles)
    if params.validation.gpu == "skip":
        gpu = {"checked": False, "reason": "validation.gpu is 'skip' in params.yaml"}
    elif failures:
        gpu = {"checked": False, "reason": "not run: an earlier gate failed"}
    else:
        gpu, gpu_failures = check_gpu(bundle_file, reference, photo)
        failures += gpu_failures
    if failures:
        raise BundleGateError(failures)
    accelerators = ("cpu",) + (("gpu",) if gpu["checked"] else ())
    # The bundle loaded whole (every signature compiled: LiteRT's Python and Kotlin APIs), with only the
    # reference's signature prepared (the C++ API's selected signatures), and the reference's own file.
    load = {acc: {"bundle": load_cost.measure(bundle_file, acc),
                  "bundle_one_signature": {"aspect": reference.aspect.name,
                                           **load_cost.measure(bundle_file, acc, reference.aspect.name)},
                  "single": {"aspect": reference.aspect.name, **load_cost.measure(reference.file, acc)}}
            for acc in accelerators}
    singles_bytes = sum(p.total for p in parts.values())
    return {
        "file": paths.BUNDLE_MODEL.as_posix(),
        "sha256": fileio.sha256_file(bundle_file),
        "bytes": built.bytes,
        "singles_bytes": singles_bytes,
        "ratio_to_singles": built.bytes / singles_bytes,
        "signatures": [{"signature": s.aspect.name, "aspect": s.aspect.name, "height": s.aspect.height,
                        "width": s.aspect.width, "file": s.file.as_posix(), "sha256": s.sha256,
                        "bytes": parts[s.aspect.name].total, "fp16_weight_bytes": parts[s.aspect.name].fp16_weights,
                        "own_bytes": own[s.aspect.name]} for s in singles],
        "gates": {"structure": {"passed": True}, "cpu_bitwise": {"photo": photo, "passed": True},
                  "gpu": gpu, "sharing": sharing},
        "load": load,
        "seconds": round(time.time() - started, 1),
    }
