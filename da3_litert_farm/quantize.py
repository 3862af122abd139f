"""Quantize stage: FP32 .tflite -> the shipped file with FP16 weights.

    python -m da3_litert_farm.quantize 9x16

ai-edge-quantizer's weight-only FLOAT_CASTING recipe stores FULLY_CONNECTED and CONV_2D
weights as FP16 behind DEQUANTIZE ops; activations, biases and other constants stay
FP32. (litert-torch's own quant configs are int8 or for its generative models.)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from da3_litert_farm import fileio, paths
from da3_litert_farm.params import ParamsError, stage_aspect

FP16_OPS = ("FULLY_CONNECTED", "CONV_2D")


def quantize_fp16(src: Path | str, dst: Path | str, ops: tuple[str, ...] = FP16_OPS) -> None:
    """Store the weights of `ops` in FP16 (the shipped file: all of FP16_OPS)."""
    from ai_edge_quantizer import qtyping, quantizer
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    q = quantizer.Quantizer(str(src))
    for op in ops:
        q.add_weight_only_config(regex=".*", operation_name=getattr(qtyping.TFLOperationName, op),
                                 num_bits=16, algorithm_key=AlgorithmName.FLOAT_CASTING)
    result = q.quantize(enable_progress_report=False, enable_progress_bar=False)
    # The result must go through a file: a quantized model held in memory (a bytearray)
    # is not callable by the interpreter.
    fileio.write_bytes(dst, bytes(result.quantized_model))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    started = time.time()
    try:
        _, aspect = stage_aspect("quantize", argv)
    except ParamsError as exc:
        print(f"quantize: {exc}", file=sys.stderr)
        return 1
    src, dst = paths.fp32_model(aspect.name), paths.fp16_model(aspect.name)
    quantize_fp16(src, dst)
    fileio.write_json(paths.quantize_report(aspect.name), {
        "aspect": aspect.name, "seconds": time.time() - started,
        "fp32_bytes": src.stat().st_size, "fp16_bytes": dst.stat().st_size})
    print(f"quantize {aspect.name}: {src.stat().st_size / 1e6:.1f} MB FP32 -> {dst.stat().st_size / 1e6:.1f} MB "
          f"FP16 in {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
