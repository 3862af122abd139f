"""Each shipped file on LiteRT's GPU accelerator in each GPU mode an app can choose: its fidelity and time.

    python -m da3_litert_farm.dev.gpu_modes [ASPECT ...] [--modes fp16,fp16_fp32_accum,fp32]
                                            [--photo coffee] [--record NAME]

Run in a built farm (after `make farm`): per aspect and mode it loads artifacts/models/A/model_fp16.tflite
on the GPU accelerator (core.gpu_modes: the default FP16, FP16 storage with FP32 accumulation as the
C API sets it, enforce_f32), checks the arithmetic the mode really has with the accumulation probe,
runs the photo and compares the depth with the official FP32 map validate@A saved (the GPU stage's
reference): 1 - Pearson r, mean relative error, seconds for the inference. One model at a time, and
nothing else heavy beside it: on a software adapter the inference runs on the CPU cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from da3_litert_farm.checks.agreement import compare
from da3_litert_farm.checks.reference_maps import references
from da3_litert_farm.config.params import load_params
from da3_litert_farm.core import paths
from da3_litert_farm.core.gpu_modes import MODES
from da3_litert_farm.gpu.gpu_runtime import GpuModel, arithmetic_precision


def measure(aspect, mode: str, photo: str) -> dict:
    ((image, reference),) = references(aspect, (photo,)).values()
    started = time.time()
    model = GpuModel(paths.fp16_model(aspect.name), mode)
    loaded = time.time()
    depth = model(image)
    agreement = compare(depth, reference)
    return {"cell": aspect.name, "H x W": f"{aspect.height} x {aspect.width}", "mode": mode,
            "computes": arithmetic_precision(mode), "1 - r": 1 - agreement["pearson"],
            "mean rel": agreement["mean_rel_error"], "inference s": round(time.time() - loaded, 1),
            "load s": round(loaded - started, 2), "fully accelerated": model.fully_accelerated,
            "adapter": str(model.adapter), "photo": photo}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.dev.gpu_modes", description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="*", help="cells of params.yaml's matrix, MODEL-TIER-ASPECT (default: all)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {list(MODES)}")
    parser.add_argument("--photo", default="coffee", help="a photo of validation.photos (default: coffee)")
    parser.add_argument("--record", metavar="NAME", help="also write the rows to docs/figures/NAME.json")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"--modes: {unknown} not in {list(MODES)}")
    params = load_params(checkpoint_files=False)
    aspects = [params.cell(c) for c in args.cells] or list(params.cells.values())
    rows = []
    for aspect in aspects:
        for mode in modes:
            row = measure(aspect, mode, args.photo)
            rows.append(row)
            print(f"{row['cell']:>16} {row['H x W']:>11} {mode:>16} (computes {row['computes']}): "
                  f"1 - r {row['1 - r']:.2e}, mean rel {row['mean rel']:.2e}, inference {row['inference s']} s, "
                  f"load {row['load s']} s, fully accelerated {row['fully accelerated']}", flush=True)
    if args.record:
        from da3_litert_farm.dev import figures

        weights = ", ".join(sorted({figures.weights_name(json.loads(paths.provenance(c.model).read_text()))
                                    for c in aspects}))
        path = figures.record(args.record, rows, figures.command_line("da3_litert_farm.dev.gpu_modes", argv),
                              weights=weights)
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
