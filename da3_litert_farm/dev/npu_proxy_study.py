"""Does a low tier's simulation predict the full size's? The HTP simulator, per aspect of params.yaml, at the shipped
tier and at a low tier of the same aspect (nothing asserted).

    python -m da3_litert_farm.dev.npu_proxy_study --proxy-tier 224 --aspects 9x16,4x3 --outlier-aspects 9x16 --record npu-proxy

For each aspect and weight set (stress weights, and for --outlier-aspects the same with DINOv2-like outlier channels,
whose FP16 numerics are harder), both shapes are built as the farm builds them (the shipped rewrites, FP16 weights),
compiled for --chip and run on the simulator on one real photo; each output is compared with the official FP32
model at its own shape. A proxy predicts the full size where its figures move with the full size's: the rows put
them side by side, with the seconds each cost. --record NAME writes docs/figures/NAME.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from da3_litert_farm.checks.agreement import compare
from da3_litert_farm.config.params import load_params
from da3_litert_farm.core.models import DEFAULT_PRESET
from da3_litert_farm.dev import figures
from da3_litert_farm.dev.bench_npu import build
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.photo_input import load_photo_tensor
from da3_litert_farm.npu.aot_compiler import compile_for
from da3_litert_farm.npu.htp_simulator import HtpSimulator


def simulated(height: int, width: int, seed: int, outliers: bool, chip: str, photo: str, work: Path) -> dict:
    """One shape: build, compile for `chip`, simulate; figures against the official model at that shape."""
    work.mkdir(parents=True)
    _, fp16, official = build(height, width, seed, work, outliers)
    image = load_photo_tensor(photo, height, width)
    reference = official_depth(official, image).numpy()
    compiled = compile_for(fp16, chip, work / f"{chip}.tflite")
    started = time.time()
    depth = HtpSimulator(work / f"{chip}.tflite", chip)(image.numpy())
    seconds = time.time() - started
    fig = compare(depth, reference)
    return {"shape": f"{height} x {width}", "1 - r": 1 - fig["pearson"], "mean rel": fig["mean_rel_error"],
            "compile s": compiled.seconds, "simulator s": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-tier", type=int, default=224)
    parser.add_argument("--aspects", help="comma-separated aspects of params.yaml (default: all)")
    parser.add_argument("--outlier-aspects", default="",
                        help="comma-separated aspects also run with planted outlier channels in the weights")
    parser.add_argument("--chip", default="SM8650")
    parser.add_argument("--photo", default="coffee")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", metavar="NAME")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    params = load_params(checkpoint_files=False)
    tier = max(params.tiers)
    cells = {c.aspect.name: c for c in params.cells.values() if c.tier == tier and c.preset == DEFAULT_PRESET}
    names = args.aspects.split(",") if args.aspects else list(cells)
    rows = []
    command = figures.command_line("da3_litert_farm.dev.npu_proxy_study", argv)
    measured = figures.measured_on(command, f"stress weights (seed {args.seed})")  # the commit that runs, not a later
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(n, False) for n in names] + [(n, True) for n in args.outlier_aspects.split(",") if n]
        for name, outliers in runs:
            weights = "stress + outliers" if outliers else "stress"
            for kind, shape in (("full", cells[name].shape), ("proxy", cells[name].proxy_shape(args.proxy_tier))):
                fig = simulated(shape.height, shape.width, args.seed, outliers, args.chip, args.photo,
                                Path(tmp) / f"{name}-{weights}-{kind}")
                row = {"aspect": name, "weights": weights, "tier": kind, **fig}
                rows.append(row)
                print(row, flush=True)
                if args.record:  # after each row: a run cut short still leaves what it measured
                    path = figures.record(args.record, rows, command, measured=measured)
    if args.record:
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
