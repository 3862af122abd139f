"""The bundle's gates: each signature of the bundle is its single file, on the CPU and on the GPU.

Run by the DVC stage in stages/bundle.py, once per bundle: one model at one tier. The bundle itself (the
shipped file of each of its cells merged into one .tflite, a signature per aspect, the FP16 weights stored
once) is built by
da3_litert_farm.convert.tflite_bundle; `check_bundle` builds it from the verified files and passes
it through every gate (a failure names the cell and the figure, and nothing is kept):
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
    """The cell whose GPU inference is cheapest: fewest pixels, then name."""
    return min(singles, key=lambda s: (s.cell.height * s.cell.width, s.cell.name))


def photo_input(photo: str, s: Shipped) -> np.ndarray:
    return normalize(cover_and_center_crop(load_photo(photo), s.cell.height, s.cell.width))


def check_structure(bundle_file: Path, singles: list[Shipped]) -> list[str]:
    merged = tflite_bundle.read(bundle_file)
    return [f"cell {s.cell.name}: signature {s.signature}'s subgraph differs from {s.file} "
            "(operators, tensors or buffer bytes)" for s in singles
            if tflite_bundle.subgraph_structure(merged, s.signature)
            != tflite_bundle.subgraph_structure(tflite_bundle.read(s.file))]


def check_cpu(bundle_file: Path, singles: list[Shipped], photo: str) -> list[str]:
    failures = []
    for s in singles:
        image = photo_input(photo, s)
        ours, theirs = TFLiteModel(bundle_file, signature=s.signature)(image), TFLiteModel(s.file)(image)
        if not np.array_equal(ours, theirs):
            failures.append(f"cell {s.cell.name}: CPU output of signature {s.signature} differs from "
                            f"{s.file} on photo {photo!r} (max abs difference {np.abs(ours - theirs).max():.3g})")
    return failures


def check_gpu(bundle_file: Path, s: Shipped, photo: str) -> tuple[dict, list[str]]:
    """Load the bundle on the GPU accelerator; run the signature of `s` once, against gpu@'s output."""
    with np.load(paths.gpu_depth(s.cell.name)) as maps:
        recorded = maps[photo]
    started = time.time()
    model = GpuModel(bundle_file, signature=s.signature)
    record = {"checked": True, "adapter": str(model.adapter), "fully_accelerated": model.fully_accelerated,
              "precision": model.precision, "signature": s.signature, "photo": photo}
    if not model.fully_accelerated:
        return record, [f"bundle: not fully accelerated on the GPU accelerator (rejected: {model.rejected_ops})"]
    ours = model(photo_input(photo, s))
    difference = float(np.abs(ours - recorded).max())
    record.update(bitwise_equal=bool(np.array_equal(ours, recorded)), max_abs_difference=difference,
                  seconds=round(time.time() - started, 1))
    failures = [] if record["bitwise_equal"] else [
        f"cell {s.cell.name}: GPU output of signature {s.signature} differs from what gpu@{s.cell.name} "
        f"recorded for {s.file} on photo {photo!r} (max abs difference {difference:.3g})"]
    return record, failures


def check_sharing(bundle_bytes: int, singles: list[Shipped], parts: dict[str, tflite_bundle.FileBytes],
                  own: dict[str, int]) -> tuple[dict, list[str]]:
    largest = max(singles, key=lambda s: (parts[s.signature].total, s.signature))
    others = sum(parts[s.signature].shape_part for s in singles if s is not largest)
    limit = parts[largest.signature].total + others + SHARING_SLACK_BYTES
    gate = {"limit": limit, "value": bundle_bytes, "passed": bundle_bytes <= limit}
    if gate["passed"]:
        return gate, []
    unshared = ", ".join(f"{a} adds {own[a] / 1e6:.1f} MB of its own" for a in own)
    return gate, [f"sharing: the bundle is {bundle_bytes / 1e6:.1f} MB, over {limit / 1e6:.1f} MB (the largest "
                  f"file, {largest.signature}, {parts[largest.signature].total / 1e6:.1f} MB, + the other "
                  f"aspects' shape parts {others / 1e6:.1f} MB + 1 MB): their weights are not shared ({unshared}); "
                  "were they all built from the same checkpoint?"]


def check_bundle(params: Params, bundle: str, out_dir: Path) -> dict:
    """Build bundle `bundle` (MODEL-TIER) of its verified cells into `out_dir`, gate it, return its record;
    raise BundleGateError on any failure."""
    started = time.time()
    # In aspect name order, the order of the bundle's signatures (and of the record's).
    singles = [verified(c) for c in sorted(params.bundle(bundle), key=lambda c: c.aspect.name)]
    built = tflite_bundle.build_bundle({s.signature: s.file for s in singles}, out_dir)
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
                  "bundle_one_signature": {"signature": reference.signature,
                                           **load_cost.measure(bundle_file, acc, reference.signature)},
                  "single": {"cell": reference.cell.name, **load_cost.measure(reference.file, acc)}}
            for acc in accelerators}
    singles_bytes = sum(p.total for p in parts.values())
    return {
        "bundle": bundle,
        "file": paths.bundle_model(bundle).as_posix(),
        "sha256": fileio.sha256_file(bundle_file),
        "bytes": built.bytes,
        "singles_bytes": singles_bytes,
        "ratio_to_singles": built.bytes / singles_bytes,
        "signatures": [{"signature": s.signature, "cell": s.cell.name, "height": s.cell.height,
                        "width": s.cell.width, "file": s.file.as_posix(), "sha256": s.sha256,
                        "bytes": parts[s.signature].total, "fp16_weight_bytes": parts[s.signature].fp16_weights,
                        "own_bytes": own[s.signature]} for s in singles],
        "gates": {"structure": {"passed": True}, "cpu_bitwise": {"photo": photo, "passed": True},
                  "gpu": gpu, "sharing": sharing},
        "load": load,
        "seconds": round(time.time() - started, 1),
    }
