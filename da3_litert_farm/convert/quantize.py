"""Quantize stage: FP32 .tflite -> the shipped file with FP16 weights.

Run by the DVC stage in stages/quantize.py.

ai-edge-quantizer's weight-only FLOAT_CASTING recipe stores FULLY_CONNECTED and CONV_2D
weights as FP16 behind DEQUANTIZE ops; activations, biases and other constants stay
FP32. (litert-torch's own quant configs are int8 or for its generative models.)
"""

from __future__ import annotations

from pathlib import Path

from da3_litert_farm.core import fileio
from da3_litert_farm.core.errors import FarmError, first_line

FP16_OPS = ("FULLY_CONNECTED", "CONV_2D")  # gpu_lint checks that every such weight is FP16


class QuantizeError(FarmError, RuntimeError):
    """ai-edge-quantizer could not read or quantize the FP32 file; the message names it."""


def quantize_fp16(src: Path | str, dst: Path | str, ops: tuple[str, ...] = FP16_OPS) -> None:
    """Store the weights of `ops` in FP16 (the shipped file: all of FP16_OPS)."""
    from ai_edge_quantizer import qtyping, quantizer
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    try:
        q = quantizer.Quantizer(str(src))
        for op in ops:
            q.add_weight_only_config(regex=".*", operation_name=getattr(qtyping.TFLOperationName, op),
                                     num_bits=16, algorithm_key=AlgorithmName.FLOAT_CASTING)
        result = q.quantize(enable_progress_report=False, enable_progress_bar=False)
    except Exception as exc:  # the quantizer's own errors (a flatbuffer it cannot parse: struct.error) say little
        raise QuantizeError(f"ai-edge-quantizer could not quantize {src} to FP16: {first_line(exc)}") from exc
    # The result must go through a file: a quantized model held in memory (a bytearray)
    # is not callable by the interpreter.
    fileio.write_bytes(dst, bytes(result.quantized_model))
