"""Precision profiler: where FP16 error enters the shipped graph on LiteRT's GPU accelerator.

    python -m da3_litert_farm.dev.precision 9x16 [--photo NAME] [--json FILE]

Builds the aspect's GPU-clean module from artifacts/checkpoint exactly as the patch stage
does, with every tap (`MonoDepth.forward_taps`: the tokens after the embedding and after each
block, each head stage, the depth logit before the final exp, the depth) as an extra
output. It converts that, stores its weights in FP16 as the quantize stage does, and runs
it on the GPU accelerator twice: in the delegate's default FP16, as phones run it, and with
enforce_f32. Per tap it prints the largest activation magnitude (the official FP32
computation, in PyTorch) and the error of GPU-FP16 against GPU-FP32: 1 - Pearson and the
relative RMS error ||fp16 - fp32|| / ||fp32||. The errors are cumulative (everything up to a
tap ran in FP16), so the growth from one tap to the next is what that piece adds.
GPU-FP32 must match PyTorch at every tap; that also proves each output was read as the
right tap. Two columns come from PyTorch (`fp16_floor`): the FP16 storage floor (what FP16
tensors cost with exact arithmetic) and the depth gain (how much of an error made at a tap
reaches the depth). A rewrite that claims an FP16 gain shows this table before and after.

`--layernorm-shift off` and `--long-output-sums` profile the graph without the LayerNorm or the
short-sum rewrite, to see what each buys.

Cost: one conversion of the aspect's shape, two GPU inferences and 26 PyTorch forwards (at
896x504 on 2 cores with the software adapter: convert 21 s, each GPU run about 60 s, the
PyTorch columns 47 s). Run it alone, like the GPU stage.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from da3_litert_farm.core import fileio, paths
from da3_litert_farm.dev import fp16_floor
from da3_litert_farm.checks.agreement import compare, relative_rms
from da3_litert_farm.convert.export import convert_to_tflite
from da3_litert_farm.gpu.gpu_runtime import GpuError, GpuModel
from da3_litert_farm.model.mono_depth import RewriteOptions
from da3_litert_farm.model.official import CheckpointError
from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.model.patch import NotExactError, patch_model, shipped_options
from da3_litert_farm.core.photos import CHECK_PHOTO, PHOTOS
from da3_litert_farm.model.photo_input import load_photo_tensor
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.model.weights import load_official_from_dir

# GPU-FP32 vs PyTorch, relative RMS error per tap. They differ by the FP16 rounding of the
# weights only (the file is the shipped kind); an output read as the wrong tap, or a wrong
# kernel, is off by order 1, and then the FP16 figures would mean nothing.
MAX_FP32_REL_RMS = 1e-2


class Tapped(torch.nn.Module):
    """The patched module with every tap of `MonoDepth.forward_taps` as an output, in order."""

    def __init__(self, mono):
        super().__init__()
        self.mono = mono

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.mono.forward_taps(image).values())


def profile(official: torch.nn.Module, aspect: str, height: int, width: int, options: RewriteOptions,
            photo: str) -> dict:
    """Convert the tapped module of `official` (consumed) at HxW, run it on the GPU in FP32 and
    FP16: the table as a dict."""
    mono, _ = patch_model(official, height, width, options)
    image = load_photo_tensor(photo, height, width)
    with torch.no_grad():
        reference = {name: t.numpy() for name, t in mono.forward_taps(image).items()}
    gpu, seconds = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        fp32_file, fp16_file = Path(tmp) / "taps_fp32.tflite", Path(tmp) / "taps_fp16.tflite"
        started = time.time()
        convert_to_tflite(Tapped(mono).eval(), height, width, fp32_file)
        quantize_fp16(fp32_file, fp16_file)  # FP16 weights, as shipped
        seconds["convert"] = time.time() - started
        for precision in ("fp32", "fp16"):
            started = time.time()
            model = GpuModel(fp16_file, precision)
            if not model.fully_accelerated:
                raise GpuError(f"the tapped graph is not fully accelerated ({', '.join(model.rejected_ops)})")
            gpu[precision] = model.run_all(image.numpy())
            seconds[f"gpu_{precision}"] = time.time() - started
            del model  # one GPU model at a time
    rows = tap_rows(reference, gpu["fp32"], gpu["fp16"])
    started = time.time()
    for name, row in fp16_floor.analyse(mono, image).items():
        rows[name].update(row)
    seconds["torch_floor_and_gain"] = time.time() - started
    return {"aspect": aspect, "height": height, "width": width, "photo": photo,
            "rewrites": dataclasses.asdict(options), "seconds": seconds, "taps": rows}


def tap_rows(reference: dict[str, np.ndarray], fp32: list[np.ndarray], fp16: list[np.ndarray]) -> dict[str, dict]:
    """Per tap: largest magnitude (PyTorch), GPU-FP32 vs PyTorch, GPU-FP16 vs GPU-FP32.
    Raises if a GPU-FP32 output is not its tap's PyTorch value."""
    if not len(reference) == len(fp32) == len(fp16):
        raise GpuError(f"{len(reference)} taps but {len(fp32)} GPU outputs")
    rows = {}
    for (name, ref), out32, out16 in zip(reference.items(), fp32, fp16):
        if out32.shape != ref.shape or not relative_rms(out32, ref) <= MAX_FP32_REL_RMS:
            raise GpuError(f"tap {name}: the GPU-FP32 output {out32.shape} is not PyTorch's {ref.shape} to "
                           f"{MAX_FP32_REL_RMS:.0e} (relative RMS): the outputs are out of tap order or a GPU kernel "
                           "is wrong")
        finite = bool(np.isfinite(out16).all())
        rows[name] = {
            "max_abs": float(np.abs(ref).max()),
            "fp32_rel_rms": relative_rms(out32, ref),
            "fp16_one_minus_pearson": 1 - compare(out16, out32)["pearson"] if finite else None,
            "fp16_rel_rms": relative_rms(out16, out32) if finite else None,
            "finite": finite,
        }
    return rows


def format_table(result: dict) -> str:
    shift = result["rewrites"]["layernorm_shift"]
    lines = [f"precision {result['aspect']} ({result['height']}x{result['width']}, photo {result['photo']}"
             f", layernorm_shift {'off' if shift is None else shift}"
             f", output sums {'short' if result['rewrites']['short_output_sums'] else 'long'})"
             ": GPU-FP16 vs GPU-FP32, cumulative up to each tap",
             f"{'tap':<14}{'max |x|':>10}{'1 - r':>11}{'rel RMS':>11}{'x prev':>8}"
             f"{'floor 1 - r':>13}{'gain':>8}{'fp32 vs torch':>15}"]
    previous = None
    for name, row in result["taps"].items():
        floor = f"{row['floor_one_minus_pearson']:>13.1e}"
        floor += f"{row['depth_gain']:>8.3g}" if row["depth_gain"] is not None else f"{'':>8}"
        if not row["finite"]:
            lines.append(f"{name:<14}{row['max_abs']:>10.1f}   NaN or Inf in FP16{'':>8}{floor}{row['fp32_rel_rms']:>15.1e}")
            previous = None
            continue
        rms = row["fp16_rel_rms"]
        growth = f"{rms / previous:>8.2f}" if previous else f"{'':>8}"
        lines.append(f"{name:<14}{row['max_abs']:>10.1f}{row['fp16_one_minus_pearson']:>11.1e}{rms:>11.1e}"
                     f"{growth}{floor}{row['fp32_rel_rms']:>15.1e}")
        previous = rms or None
    s = result["seconds"]
    lines.append("floor: every PyTorch op's result rounded to FP16, exact arithmetic; gain: 1 - r at the depth / "
                 "1 - r at the tap for a small random error planted there (da3_litert_farm.dev.fp16_floor)")
    lines.append(f"convert+quantize {s['convert']:.0f} s, GPU-FP32 {s['gpu_fp32']:.0f} s, GPU-FP16 {s['gpu_fp16']:.0f} s, "
                 f"floor and gain in PyTorch {s['torch_floor_and_gain']:.0f} s")
    return "\n".join(lines)


def _layernorm_shift(value: str) -> int | None:
    if value == "off":
        return None
    if not value.isdigit() or not 1 <= int(value) <= 12:
        raise argparse.ArgumentTypeError(f"{value!r}: give an integer K in [1, 12] (LayerNorms see x * 2^-K), or off")
    return int(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="where FP16 error enters the shipped graph on the GPU")
    parser.add_argument("cell", help="a cell of params.yaml's matrix, MODEL-TIER-ASPECT")
    parser.add_argument("--photo", default=CHECK_PHOTO, choices=PHOTOS)
    parser.add_argument("--layernorm-shift", type=_layernorm_shift, metavar="K|off",
                        default=RewriteOptions().layernorm_shift,
                        help="LayerNorms on x * 2^-K (rewrites.PrescaledLayerNorm), or off; default: as shipped "
                             f"({RewriteOptions().layernorm_shift})")
    parser.add_argument("--long-output-sums", action="store_true",
                        help="keep the head's last convs as single long sums (without rewrites.ShortSumConv2d)")
    parser.add_argument("--json", help="also write the table as JSON here")
    args = parser.parse_args(argv)
    try:
        params = load_params(checkpoint_files=False)
        aspect = params.cell(args.cell)
        options = dataclasses.replace(shipped_options(params.preset(aspect.model), aspect.height, aspect.width,
                                                      params.max_tensor_mib),
                                      layernorm_shift=args.layernorm_shift,
                                      short_output_sums=not args.long_output_sums)
        official = load_official_from_dir(paths.checkpoint_dir(aspect.model))
        result = profile(official, aspect.name, aspect.height, aspect.width, options, args.photo)
    except (ParamsError, CheckpointError, NotExactError, GpuError) as exc:
        print(f"precision {args.cell}: {exc}", file=sys.stderr)
        return 1
    print(format_table(result))
    if args.json:
        fileio.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
