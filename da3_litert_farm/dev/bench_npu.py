"""What compiling for Qualcomm NPUs costs, and what the HTP simulator measures, at one shape (nothing asserted).

    python -m da3_litert_farm.dev.bench_npu --height 126 --width 224 --simulate all --compare-fp32 \
        --bundle-with 224x126 --record npu-small
    python -m da3_litert_farm.dev.bench_npu --height 896 --width 504 --chips SM8550,SM8650,SM8750,SM8850 \
        --record npu-896x504

Builds the shipped file at that shape (stress weights, the shipped rewrites, FP16 weights: as the farm does) and its
FP32 file, then per chip of --chips: LiteRT's AOT compile of the shipped file (ops on the NPU, partitions, MB, seconds,
the compiler's peak memory). Per chip of --simulate: the compiled binary on Qualcomm's HTP simulator on one real photo,
against the official FP32 model and the CPU file (XNNPACK), and the seconds per inference. Also: whether the FP32
file's binary computes the same as the shipped file's (--compare-fp32), how many bytes differ when the same file is
compiled twice, which chips' simulated outputs are bitwise equal (which chip can stand for which), and whether a
bundle compiles into one NPU file (--bundle-with). --record NAME writes docs/figures/NAME.json.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from da3_litert_farm.checks.agreement import compare
from da3_litert_farm.checks.fidelity import TFLiteModel
from da3_litert_farm.config.params import load_params
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.core.models import DEFAULT_PRESET, PRESETS
from da3_litert_farm.core.npu_targets import QUALCOMM, simulable
from da3_litert_farm.dev import figures
from da3_litert_farm.dev.bench import convert_in_subprocess
from da3_litert_farm.model.mono_depth import MonoDepth
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.patch import export_program, shipped_options
from da3_litert_farm.model.photo_input import load_photo_tensor
from da3_litert_farm.model.stress import stress_model
from da3_litert_farm.npu.aot_compiler import compile_for
from da3_litert_farm.npu.htp_simulator import HtpSimulator
from da3_litert_farm.npu.qnn_host import qairt_version

DEFAULT_CHIPS = ("SM8450", "SM8550", "SM8650", "SM8750", "SM8850")


def build(height: int, width: int, seed: int, workdir: Path, outliers: bool = False) -> tuple[Path, Path, torch.nn.Module]:
    """(FP32 file, shipped FP16 file, the official model) at this shape, as the farm builds them."""
    official = stress_model(seed, outliers=outliers)
    options = shipped_options(PRESETS[DEFAULT_PRESET], height, width, load_params(checkpoint_files=False).max_tensor_mib)
    program, fp32, fp16 = workdir / "patched.pt2", workdir / "model_fp32.tflite", workdir / "model_fp16.tflite"
    export_program(MonoDepth(copy.deepcopy(official), height, width, options).eval(), program)  # MonoDepth rewrites it
    convert_in_subprocess(program, fp32)
    quantize_fp16(fp32, fp16)
    return fp32, fp16, official


def bundle_facts(fp16: Path, other_shape: str, seed: int, soc: str, work: Path) -> list[tuple[str, object]]:
    """Whether LiteRT's AOT compile takes a bundle (one signature per aspect) into one NPU file for `soc`."""
    from da3_litert_farm.convert.tflite_bundle import merge
    from da3_litert_farm.npu.aot_compiler import NpuCompileError, partitions

    height, width = map(int, other_shape.split("x"))
    (work / "other").mkdir()
    _, other, _ = build(height, width, seed, work / "other")
    bundle = work / "bundle.tflite"
    bundle.write_bytes(merge({"a": fp16, "b": other}))
    try:
        c = compile_for(bundle, soc, work / "bundle_npu.tflite")
    except NpuCompileError as exc:
        return [(f"bundle of 2 signatures for {soc}", f"refused: {exc}")]
    return [(f"bundle of 2 signatures for {soc}: ops on the NPU / ops", f"{c.ops_on_npu} / {c.ops_total}"),
            (f"bundle of 2 signatures for {soc}: NPU partitions", c.partitions),
            (f"bundle of 2 signatures for {soc}: QNN context binaries in the file",
             len(partitions(work / "bundle_npu.tflite"))),
            (f"bundle of 2 signatures for {soc}: MB (the GPU bundle's MB)",
             f"{c.bytes / 1e6:.1f} ({bundle.stat().st_size / 1e6:.1f})")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--height", type=int, required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0, help="stress-weights seed")
    parser.add_argument("--photo", default="coffee")
    parser.add_argument("--chips", default=",".join(DEFAULT_CHIPS), help="comma-separated Qualcomm chips to compile for")
    parser.add_argument("--simulate", default="SM8650", help="comma-separated chips to simulate, or all")
    parser.add_argument("--compare-fp32", action="store_true",
                        help="also compile the FP32 file for the first simulated chip and compare its simulated output")
    parser.add_argument("--bundle-with", metavar="HxW",
                        help="also merge the shipped file with one at this shape into a bundle (two signatures) and "
                             "compile that for the first simulated chip")
    parser.add_argument("--record", metavar="NAME", help="also write the figures to docs/figures/NAME.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    chips = args.chips.split(",")
    simulated = [c for c in chips if simulable(c)] if args.simulate == "all" else args.simulate.split(",")
    rows, outputs = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        fp32, fp16, official = build(args.height, args.width, args.seed, work)
        image = load_photo_tensor(args.photo, args.height, args.width)
        reference = official_depth(official, image).numpy()
        cpu = TFLiteModel(fp16, threads=2)(image.numpy())
        shape = f"{args.height} x {args.width}"
        for soc in chips:
            c = compile_for(fp16, soc, work / f"{soc}.tflite")
            row = {"shape": shape, "chip": soc, "HTP": f"v{QUALCOMM[soc].htp_arch}", "ops on NPU": c.ops_on_npu,
                   "ops": c.ops_total, "partitions": c.partitions, "MB": c.bytes / 1e6, "compile s": c.seconds,
                   "compile peak MiB": c.peak_rss_mib}
            if soc in simulated:
                started = time.time()
                depth = HtpSimulator(work / f"{soc}.tflite", soc)(image.numpy())
                row["simulator s"] = time.time() - started
                vs_official, vs_cpu = compare(depth, reference), compare(depth, cpu)
                row.update({"1 - r vs official": 1 - vs_official["pearson"],
                            "mean rel vs official": vs_official["mean_rel_error"],
                            "1 - r vs CPU file": 1 - vs_cpu["pearson"], "mean rel vs CPU file": vs_cpu["mean_rel_error"]})
                outputs[soc] = depth
            rows.append(row)
            print(row, flush=True)
        cpu_vs_official = compare(cpu, reference)
        notes = [{"shape": shape, "chip": "CPU file (XNNPACK)", "1 - r vs official": 1 - cpu_vs_official["pearson"],
                  "mean rel vs official": cpu_vs_official["mean_rel_error"]}]
        first = simulated[0]
        compile_for(fp16, first, work / "again.tflite")
        once, twice = (work / f"{first}.tflite").read_bytes(), (work / "again.tflite").read_bytes()
        differing = sum(a != b for a, b in zip(once, twice)) + abs(len(once) - len(twice))
        facts = [("QAIRT host libraries", qairt_version()),
                 (f"{first} compiled twice: bytes that differ", differing)]
        if args.compare_fp32:  # one more compile and simulator run
            from_fp32 = compile_for(fp32, first, work / "from_fp32.tflite")
            fp32_depth = HtpSimulator(work / "from_fp32.tflite", first)(image.numpy())
            facts += [(f"{first} from the FP32 file: MB", from_fp32.bytes / 1e6),
                      (f"{first} from the FP32 file: simulated output bitwise equal to the shipped file's",
                       bool(np.array_equal(fp32_depth, outputs[first])))]
        if len(outputs) > 1:
            equal = {soc: sorted(o for o in outputs if np.array_equal(outputs[o], outputs[soc])) for soc in outputs}
            facts += [(f"{soc} simulated output bitwise equal to", ", ".join(equal[soc])) for soc in equal]
        if args.bundle_with:
            facts += bundle_facts(fp16, args.bundle_with, args.seed, first, work)
        print(*(f"{k}: {v}" for k, v in facts), sep="\n")
    if args.record:
        command = figures.command_line("da3_litert_farm.dev.bench_npu", argv)
        weights = f"stress weights (seed {args.seed}), not a trained checkpoint"
        for name, table in ((args.record, rows + notes),
                            (f"{args.record}-facts", [{"quantity": k, "value": v} for k, v in facts])):
            print(f"recorded {figures.record(name, table, command, weights=weights)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
