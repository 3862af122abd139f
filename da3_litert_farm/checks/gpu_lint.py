"""GPU lint: read a .tflite flatbuffer and check it against the LiteRT GPU delegate's rules.

The rules restate, in our words, what the GPU delegate's op parsers accept (LiteRT
`tflite/tools/versioning/gpu_compatibility.cc` and the ML Drift model builder), tightened
where mobile drivers are known to fail (TRANSPOSE_CONV, GATHER, SELECT). The analyzer
bundled with ai_edge_litert calls anything "compatible", so this reads the graph itself.

    python -m da3_litert_farm.checks.gpu_lint artifacts/9x16/model_fp16.tflite
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils

from da3_litert_farm.core.fileio import sha256_file
from da3_litert_farm.convert.quantize import FP16_OPS
from da3_litert_farm.core.tensor_plan import MIB, fp16_bytes

MAX_RANK = 4

# Ops the GPU delegate takes (each still subject to the per-op checks below).
ALLOWED_OPS = frozenset({
    "ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "POW",
    "ABS", "NEG", "EXP", "LOG", "RSQRT", "SQRT", "SQUARE", "SIN", "COS", "TANH", "LOGISTIC",
    "GELU", "RELU", "RELU6", "HARD_SWISH",
    "MEAN", "SUM",
    "FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D", "BATCH_MATMUL", "SOFTMAX",
    "AVERAGE_POOL_2D", "MAX_POOL_2D",
    "RESHAPE", "TRANSPOSE", "CONCATENATION", "SLICE", "STRIDED_SLICE", "SPLIT", "PAD",
    "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR",
    "DEQUANTIZE",
})
# Named so the report can say why, not just "not allowed".
FORBIDDEN_OPS = {
    "GATHER": "gather lookups run on the CPU or fail on mobile GPU delegates",
    "GATHER_ND": "not supported by the GPU delegate",
    "BROADCAST_TO": "not supported by the GPU delegate",
    "TRANSPOSE_CONV": "rejected by mobile GPU delegates (ML Drift on Pixel)",
    "SELECT": "only restricted forms run on the GPU delegate",
    "SELECT_V2": "only restricted forms run on the GPU delegate",
    "CUSTOM": "custom and flex ops are not GPU ops",
}
UNARY_OPS = frozenset({"ABS", "NEG", "EXP", "LOG", "RSQRT", "SQRT", "SQUARE", "SIN", "COS",
                       "TANH", "LOGISTIC", "GELU"})
BINARY_OPS = frozenset({"SUB", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "POW"})
# The ops whose weights the quantizer stores in FP16: every one must be.
FP16_WEIGHT_OPS = frozenset(FP16_OPS)

_OP_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_TYPE_NAMES = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}


@dataclass
class LintReport:
    path: str
    sha256: str  # of the file linted: a report is about exactly one file
    op_histogram: dict[str, int]
    max_rank: int
    weight_dtypes: dict[str, int]
    fp16_weights: int
    largest_tensor: dict  # name, shape, fp16_bytes (as the GPU lays it out)
    max_tensor_bytes: int | None
    macs: int  # multiply-accumulates per inference, counted from the graph's MAC ops
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def all_weights_fp16(self) -> bool:
        """Every CONV_2D / FULLY_CONNECTED weight is stored in FP16 (and there is one)."""
        return set(self.weight_dtypes) == {"FLOAT16"}

    def summary(self) -> dict:
        """The catalog's view: counts and verdict, not the full problem list."""
        return {
            "sha256": self.sha256,
            "gpu_clean": self.ok,
            "ops": sum(self.op_histogram.values()),
            "op_histogram": self.op_histogram,
            "max_rank": self.max_rank,
            "weight_dtypes": self.weight_dtypes,
            "fp16_weight_tensors": self.fp16_weights,
            "largest_tensor": self.largest_tensor,
            "max_tensor_bytes": self.max_tensor_bytes,
            "macs": self.macs,
            "problems": self.problems,
        }


class _Graph:
    """Just enough of a flatbuffer subgraph to answer: op name, shapes, const-ness."""

    def __init__(self, model, subgraph):
        self.model, self.g = model, subgraph

    def op_name(self, op) -> str:
        code = self.model.operatorCodes[op.opcodeIndex]
        name = _OP_NAMES.get(max(code.builtinCode, code.deprecatedBuiltinCode), "UNKNOWN")
        if name == "CUSTOM":
            return f"CUSTOM({(code.customCode or b'').decode()})"
        return name

    def tensor(self, index):
        return self.g.tensors[index]

    def shape(self, index) -> list[int]:
        shape = self.tensor(index).shape
        return [] if shape is None else [int(d) for d in shape]

    def is_const(self, index: int) -> bool:
        buffer = self.model.buffers[self.tensor(index).buffer]
        has_data = buffer.data is not None and len(buffer.data) > 0
        return has_data or bool(buffer.size)  # large models store data by offset

    def describe(self, op) -> str:
        ins = ", ".join(str(self.shape(i)) for i in op.inputs if i >= 0)
        outs = ", ".join(str(self.shape(i)) for i in op.outputs)
        return f"{self.op_name(op)} inputs [{ins}] -> [{outs}]"


def lint(path: str | Path, require_fp16: bool, max_tensor_bytes: int | None = None) -> LintReport:
    """Check one .tflite file; `require_fp16` for the shipped (quantized) file; `max_tensor_bytes`
    bounds the largest tensor in FP16 as the GPU stores it (da3_litert_farm.core.tensor_plan)."""
    model = flatbuffer_utils.read_model(str(path))
    problems: list[str] = []
    histogram: Counter[str] = Counter()
    weight_dtypes: Counter[str] = Counter()
    max_rank = macs = 0
    largest = {"name": "", "shape": [], "fp16_bytes": 0}
    if len(model.subgraphs) != 1:
        problems.append(f"{len(model.subgraphs)} subgraphs: control flow is not a GPU graph")
    for subgraph in model.subgraphs:
        graph = _Graph(model, subgraph)
        for index, tensor in enumerate(subgraph.tensors):
            shape = graph.shape(index)
            max_rank = max(max_rank, len(shape))
            if len(shape) > MAX_RANK:
                problems.append(f"tensor {tensor.name.decode()!r} has rank {len(shape)} {shape} (> {MAX_RANK})")
            if fp16_bytes(shape) > largest["fp16_bytes"]:
                largest = {"name": tensor.name.decode(), "shape": shape, "fp16_bytes": fp16_bytes(shape)}
        producers = {out: op for op in subgraph.operators for out in op.outputs}
        for op in subgraph.operators:
            name = graph.op_name(op)
            histogram[name] += 1
            problems.extend(_check_op(graph, op, name))
            macs += _macs(graph, op, name)
            if name in FP16_WEIGHT_OPS:
                weight_dtypes[_weight_dtype(graph, producers, op.inputs[1])] += 1
    fp16 = sum(1 for sg in model.subgraphs for t in sg.tensors if t.type == schema.TensorType.FLOAT16)
    if require_fp16:
        not_fp16 = {dtype: n for dtype, n in weight_dtypes.items() if dtype != "FLOAT16"}
        if not weight_dtypes.get("FLOAT16"):
            problems.append("no FP16 weights: the shipped file must carry FP16 (dequantized) weights")
        elif not_fp16:
            problems.append(f"not every {'/'.join(sorted(FP16_WEIGHT_OPS))} weight is FP16: {not_fp16} "
                            f"of {sum(weight_dtypes.values())}")
    if max_tensor_bytes is not None and largest["fp16_bytes"] > max_tensor_bytes:
        problems.append(f"largest tensor {largest['name']!r} {largest['shape']} is {largest['fp16_bytes'] / MIB:.1f} "
                        f"MiB in FP16, over the limit of {max_tensor_bytes / MIB:.0f} MiB (max_tensor_mib)")
    return LintReport(str(path), sha256_file(path), dict(histogram.most_common()), max_rank, dict(weight_dtypes),
                      fp16, largest, max_tensor_bytes, macs, problems)


def _macs(graph: _Graph, op, name: str) -> int:
    """Multiply-accumulates of one op (TFLite layouts: NHWC activations, OHWI / 1HWO filters)."""
    if name not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL"):
        return 0
    out = math.prod(graph.shape(op.outputs[0]))
    if name == "CONV_2D":
        _, kh, kw, cin = graph.shape(op.inputs[1])
        return out * kh * kw * cin
    if name == "DEPTHWISE_CONV_2D":
        _, kh, kw, _ = graph.shape(op.inputs[1])
        return out * kh * kw
    if name == "FULLY_CONNECTED":
        return out * graph.shape(op.inputs[1])[-1]
    lhs = graph.shape(op.inputs[0])
    return out * (lhs[-2] if op.builtinOptions.adjX else lhs[-1])


def _weight_dtype(graph: _Graph, producers: dict, index: int) -> str:
    """dtype of a weight as stored: FP16 weights reach the op through a DEQUANTIZE."""
    producer = producers.get(index)
    if producer is not None and graph.op_name(producer) == "DEQUANTIZE":
        index = producer.inputs[0]
    return _TYPE_NAMES.get(graph.tensor(index).type, "UNKNOWN")


def _check_op(graph: _Graph, op, name: str) -> list[str]:
    where = graph.describe(op)
    base = name.split("(")[0]
    if base in FORBIDDEN_OPS:
        return [f"forbidden op: {where} ({FORBIDDEN_OPS[base]})"]
    if base not in ALLOWED_OPS:
        return [f"op not in the GPU allowlist: {where}"]
    inputs = [i for i in op.inputs if i >= 0]
    runtime = [i for i in inputs if not graph.is_const(i)]
    opts = op.builtinOptions
    problems = []
    if base in UNARY_OPS and (len(runtime) != 1 or len(inputs) != 1):
        problems.append(f"{where}: unary op needs exactly one runtime input")
    if base in BINARY_OPS and not runtime:
        problems.append(f"{where}: elementwise op with no runtime input")
    if base in ("SLICE", "STRIDED_SLICE") and len(graph.shape(inputs[0])) not in (3, 4):
        problems.append(f"{where}: the GPU slices only rank-3 or rank-4 tensors")
    if base == "RESIZE_BILINEAR" and opts.alignCorners and opts.halfPixelCenters:
        problems.append(f"{where}: align_corners and half_pixel_centers are both set")
    if base == "SOFTMAX" and opts.beta != 1:
        problems.append(f"{where}: softmax beta {opts.beta} != 1")
    if base in ("MEAN", "SUM") and not graph.is_const(inputs[1]):
        problems.append(f"{where}: reduction axes must be constant")
    if base == "PAD" and graph.shape(inputs[1]) not in ([3, 2], [4, 2]):
        problems.append(f"{where}: paddings must be 3x2 or 4x2")
    if base in ("ADD", "MUL") and len(inputs) == 2:
        a, b = graph.shape(inputs[0]), graph.shape(inputs[1])
        if not _broadcastable(a, b):
            problems.append(f"{where}: shapes do not broadcast")
    if base in ("RESHAPE", "TRANSPOSE") and len(runtime) != 1:
        problems.append(f"{where}: needs exactly one runtime input")
    if base == "FULLY_CONNECTED" and opts.keepNumDims and \
            len(graph.shape(inputs[0])) != len(graph.shape(op.outputs[0])):
        problems.append(f"{where}: keep_num_dims with a rank change")
    return problems


def _broadcastable(a: list[int], b: list[int]) -> bool:
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tflite", nargs="+")
    parser.add_argument("--require-fp16", action="store_true", help="fail unless every FC/CONV_2D weight is FP16")
    parser.add_argument("--max-tensor-mib", type=int, help="fail if the largest FP16 tensor is larger")
    args = parser.parse_args(argv)
    status = 0
    limit = args.max_tensor_mib * MIB if args.max_tensor_mib else None
    for path in args.tflite:
        report = lint(path, args.require_fp16, limit)
        print(json.dumps({"path": path, **report.summary()}, indent=2))
        status |= 0 if report.ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
