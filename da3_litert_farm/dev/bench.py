"""Benchmark one shape end to end and print the figures (nothing here is asserted).

    python -m da3_litert_farm.dev.bench --height 896 --width 504
    python -m da3_litert_farm.dev.bench --height 896 --width 504 --compare-upsamplers
    python -m da3_litert_farm.dev.bench --height 896 --width 504 --checkpoint artifacts/checkpoint
    python -m da3_litert_farm.dev.bench --height 896 --width 504 --record bench_896x504

Reports: convert wall time and peak RSS (the converter runs in its own process, as in the
farm), FP32 and FP16 sizes, TFLite CPU latency (median of --runs, --threads threads)
beside the official PyTorch eager latency at the same shape, the fidelity of the FP16
file against the official model on real photos, and the same file on LiteRT's GPU
accelerator (load, one inference, fidelity in FP16 and with enforce_f32). Weights: a checkpoint directory in the
Hub layout, or stress weights (--seed) when none is given. The model is built with the shipped
rewrites (patch.shipped_options: attention chunked as the farm chunks it under max_tensor_mib);
--compare-upsamplers varies only the upsampler. --record NAME also writes the figures to
docs/figures/NAME.json (see da3_litert_farm.dev.figures).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from da3_litert_farm.checks.agreement import compare
from da3_litert_farm.checks.fidelity import TFLiteModel, fidelity_per_photo
from da3_litert_farm.checks.gpu_lint import lint
from da3_litert_farm.config.params import load_params
from da3_litert_farm.dev import figures
from da3_litert_farm.gpu.gpu_runtime import GpuModel
from da3_litert_farm.model.mono_depth import MonoDepth, RewriteOptions
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.core.models import DEFAULT_PRESET, PRESETS
from da3_litert_farm.model.patch import export_program, shipped_options
from da3_litert_farm.core import peak_memory
from da3_litert_farm.core.photos import PHOTOS
from da3_litert_farm.model.photo_input import load_photo_tensor
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.model.rewrites import UPSAMPLERS


def median_seconds(fn, runs: int) -> float:
    fn()  # warm-up: allocation, XNNPACK packing
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def convert_in_subprocess(program: Path, out: Path) -> tuple[float, float]:
    """Run the export stage's converter in a child process: (wall seconds, peak RSS MB)."""
    started = time.time()
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: the converter logs a lot
        proc = subprocess.Popen([sys.executable, "-m", "da3_litert_farm.convert.export", "--program", str(program), "--out", str(out)],
                                stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(proc.pid, 0)  # wait4: this child's own peak RSS
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            log.seek(0)
            raise RuntimeError(f"conversion failed:\n{log.read().decode()[-3000:]}")
    return time.time() - started, peak_memory.maxrss_to_mib(usage.ru_maxrss)


def bench_gpu(model_file: Path, official, photo: str, height: int, width: int) -> dict:
    """The shipped file on LiteRT's GPU accelerator, default precision (FP16) and enforce_f32:
    load time, one inference (the first at a shape also compiles shaders), fidelity on one photo."""
    image = load_photo_tensor(photo, height, width)
    reference = official_depth(official, image).numpy()
    out = {"photo": photo}
    for precision, enforce_f32 in (("fp16", False), ("fp32", True)):
        started = time.perf_counter()
        model = GpuModel(model_file, "fp32" if enforce_f32 else "fp16")
        loaded = time.perf_counter()
        depth = model(image.numpy())
        out[precision] = {"load_s": loaded - started, "inference_s": time.perf_counter() - loaded,
                          "fully_accelerated": model.fully_accelerated, "adapter": str(model.adapter),
                          **compare(depth, reference)}
    return out


def bench_variant(official, height, width, options: RewriteOptions, workdir: Path, runs: int, threads: int, photos,
                  with_gpu: bool = True) -> dict:
    upsampler = options.upsampler
    mono = MonoDepth(copy.deepcopy(official), height, width, options).eval()
    image = load_photo_tensor(photos[0], height, width)
    with torch.no_grad():
        patched_s = median_seconds(lambda: mono(image), runs)
    program, fp32, fp16 = (workdir / f"{upsampler}.{ext}" for ext in ("pt2", "fp32.tflite", "fp16.tflite"))
    export_program(mono, program)
    convert_s, convert_rss = convert_in_subprocess(program, fp32)
    started = time.time()
    quantize_fp16(fp32, fp16)
    quantize_s = time.time() - started
    model = TFLiteModel(fp16, threads=threads)
    x = image.numpy()
    per_photo = fidelity_per_photo(official, model, photos, height, width)
    report = lint(fp16, require_fp16=True)
    fp32_model = TFLiteModel(fp32, threads=threads)
    gpu = bench_gpu(fp16, official, photos[0], height, width) if with_gpu else None
    return {
        "upsampler": upsampler,
        "patched_torch_s": patched_s,
        "convert_s": convert_s,
        "convert_peak_rss_mb": convert_rss,
        "quantize_s": quantize_s,
        "fp32_mb": fp32.stat().st_size / 1e6,
        "fp16_mb": fp16.stat().st_size / 1e6,
        "tflite_fp16_s": median_seconds(lambda: model(x), runs),
        "tflite_fp32_s": median_seconds(lambda: fp32_model(x), runs),
        "gpu_clean": report.ok,
        "ops": sum(report.op_histogram.values()),
        "per_photo": per_photo,
        "gpu": gpu,
    }


def figure_rows(official_s: float, results: list[dict]) -> list[dict]:
    """What main prints, one row per measured quantity (the upsampler first when several were compared)."""
    rows = [{"quantity": "official PyTorch eager (FP32)", "value": official_s, "unit": "s/image"}]
    for r in results:
        variant = [("patched PyTorch eager", r["patched_torch_s"], "s/image"),
                   ("convert (litert-torch)", r["convert_s"], "s"),
                   ("convert peak RSS", r["convert_peak_rss_mb"], "MB"),
                   ("quantize FP16", r["quantize_s"], "s"),
                   ("size FP32", r["fp32_mb"], "MB"),
                   ("size FP16", r["fp16_mb"], "MB"),
                   ("TFLite CPU FP32", r["tflite_fp32_s"], "s/image"),
                   ("TFLite CPU FP16 (shipped)", r["tflite_fp16_s"], "s/image"),
                   ("TFLite CPU FP16 speed-up over official eager", official_s / r["tflite_fp16_s"], "x"),
                   ("GPU-clean", r["gpu_clean"], ""),
                   ("ops", r["ops"], "")]
        for photo, m in r["per_photo"].items():
            variant += [(f"CPU FP16 1 - r, {photo}", 1 - m["pearson"], ""),
                        (f"CPU FP16 mean rel error, {photo}", m["mean_rel_error"], "")]
        if g := r["gpu"]:
            variant.append(("GPU adapter", g["fp16"]["adapter"], ""))
            for precision, label in (("fp16", "GPU FP16"), ("fp32", "GPU enforce_f32")):
                m = g[precision]
                variant += [(f"{label} load", m["load_s"], "s"),
                            (f"{label} one inference", m["inference_s"], "s"),
                            (f"{label} fully accelerated", m["fully_accelerated"], ""),
                            (f"{label} 1 - r, {g['photo']}", 1 - m["pearson"], ""),
                            (f"{label} mean rel error, {g['photo']}", m["mean_rel_error"], "")]
        upsampler = {"upsampler": r["upsampler"]} if len(results) > 1 else {}
        rows += [{**upsampler, "quantity": q, "value": v, "unit": u} for q, v, u in variant]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--height", type=int, required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--checkpoint", help="Hub-layout checkpoint directory (default: stress weights)")
    parser.add_argument("--seed", type=int, default=0, help="stress-weights seed when no --checkpoint")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--photos", nargs="+", default=list(PHOTOS[:3]))
    parser.add_argument("--compare-upsamplers", action="store_true",
                        help="build, convert and time both TRANSPOSE_CONV rewrites")
    parser.add_argument("--no-gpu", action="store_true", help="skip the GPU accelerator runs (minutes on a CPU)")
    parser.add_argument("--max-tensor-mib", type=int,
                        help="largest GPU tensor, for the attention chunking (default: params.yaml's)")
    parser.add_argument("--record", metavar="NAME", help="also write the figures to docs/figures/NAME.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    h, w = args.height, args.width
    max_tensor_mib = args.max_tensor_mib or load_params(checkpoint_files=False).max_tensor_mib

    if args.checkpoint:
        from da3_litert_farm.model.weights import load_official_from_dir, read_model_name

        official, weights = load_official_from_dir(args.checkpoint), args.checkpoint
        model = PRESETS[read_model_name(Path(args.checkpoint))]
    else:
        from da3_litert_farm.model.stress import stress_model

        official, weights = stress_model(args.seed), f"stress seed {args.seed}"
        model = PRESETS[DEFAULT_PRESET]
    shipped = shipped_options(model, h, w, max_tensor_mib)
    image = load_photo_tensor(args.photos[0], h, w)
    official_s = median_seconds(lambda: official_depth(official, image), args.runs)

    upsamplers = UPSAMPLERS if args.compare_upsamplers else (shipped.upsampler,)
    with tempfile.TemporaryDirectory() as tmp:
        results = [bench_variant(official, h, w, dataclasses.replace(shipped, upsampler=u), Path(tmp), args.runs,
                                 args.threads, tuple(args.photos), with_gpu=not args.no_gpu)
                   for u in upsamplers]

    print(f"\nDA3-Small at {h}x{w} (HxW), weights: {weights}, {args.threads} threads, median of {args.runs} runs")
    print(f"shipped rewrites, attention query chunk {shipped.attention_query_chunk} (max_tensor_mib {max_tensor_mib})")
    print(f"official PyTorch eager (FP32):          {official_s:8.3f} s/image")
    for r in results:
        print(f"\n[{r['upsampler']}]  GPU-clean: {r['gpu_clean']}, {r['ops']} ops")
        print(f"  patched PyTorch eager:                {r['patched_torch_s']:8.3f} s/image")
        print(f"  convert (litert-torch):               {r['convert_s']:8.1f} s, peak RSS {r['convert_peak_rss_mb']:.0f} MB")
        print(f"  quantize FP16:                        {r['quantize_s']:8.1f} s")
        print(f"  size FP32 / FP16:                     {r['fp32_mb']:8.1f} / {r['fp16_mb']:.1f} MB")
        print(f"  TFLite CPU FP32:                      {r['tflite_fp32_s']:8.3f} s/image")
        print(f"  TFLite CPU FP16 (shipped):            {r['tflite_fp16_s']:8.3f} s/image "
              f"({official_s / r['tflite_fp16_s']:.1f}x faster than official eager)")
        for photo, m in r["per_photo"].items():
            print(f"  fidelity {photo:>16}: pearson {m['pearson']:.8f} (1-r {1 - m['pearson']:.1e}), "
                  f"cosine {m['cosine']:.8f}, max abs {m['max_abs_error']:.2e}, mean rel {m['mean_rel_error']:.2e}")
        if r["gpu"]:
            g = r["gpu"]
            print(f"  GPU accelerator on {g['fp16']['adapter']}, photo {g['photo']}:")
            for precision in ("fp16", "fp32"):
                m = g[precision]
                print(f"    {precision} ({'default' if precision == 'fp16' else 'enforce_f32'}): load {m['load_s']:.1f} s, "
                      f"one inference {m['inference_s']:.1f} s, fully accelerated {m['fully_accelerated']}, "
                      f"1-r {1 - m['pearson']:.1e}, mean rel {m['mean_rel_error']:.2e}")
    if args.record:
        label = (f"weights from {args.checkpoint}" if args.checkpoint
                 else f"stress weights (seed {args.seed}), not a trained checkpoint")
        path = figures.record(args.record, figure_rows(official_s, results),
                              figures.command_line("da3_litert_farm.dev.bench", argv), weights=label)
        print(f"\nrecorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
