"""The GPU lint reads real flatbuffers and names each offending op with its shapes."""

import json
import re
import subprocess
import sys

import pytest
import torch
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils
from torch import nn

from da3_litert_farm.core.fileio import sha256_file
from da3_litert_farm.checks.gpu_lint import lint, main
from da3_litert_farm.core.tensor_plan import MIB
from da3_litert_farm.convert.quantize import quantize_fp16


def _count_ops(path, *names) -> int:
    """How many operators of these builtin types the flatbuffer holds, read without the lint."""
    model = flatbuffer_utils.read_model(str(path))
    wanted = {getattr(schema.BuiltinOperator, name) for name in names}
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    return sum(codes[op.opcodeIndex] in wanted for graph in model.subgraphs for op in graph.operators)


def test_shipped_small_model_passes(small_tflite):
    fp32, fp16 = small_tflite
    report = lint(fp16, require_fp16=True)
    assert report.ok, report.problems
    assert report.max_rank == 4
    weights = _count_ops(fp32, "CONV_2D", "FULLY_CONNECTED")  # one weight each, FP32 before quantizing
    assert weights > 0 and report.weight_dtypes == {"FLOAT16": weights}  # every one now in FP16
    assert report.op_histogram["DEQUANTIZE"] == weights


def test_every_conv_and_fc_weight_must_be_fp16(small_tflite, tmp_path):
    fp32, _ = small_tflite
    partial = tmp_path / "fc_only.tflite"
    quantize_fp16(fp32, partial, ops=("FULLY_CONNECTED",))  # CONV_2D weights stay FP32
    report = lint(partial, require_fp16=True)
    assert not report.all_weights_fp16 and report.weight_dtypes["FLOAT16"] > 0
    assert report.problems == [f"not every CONV_2D/FULLY_CONNECTED weight is FP16: "
                               f"{{'FLOAT32': {report.weight_dtypes['FLOAT32']}}} of {sum(report.weight_dtypes.values())}"]


def test_largest_tensor_over_the_limit_is_named(small_tflite):
    _, fp16 = small_tflite
    report = lint(fp16, require_fp16=True, max_tensor_bytes=2 * MIB)
    assert report.largest_tensor["shape"] == [384, 3, 3, 384]
    assert report.problems == [f"largest tensor {report.largest_tensor['name']!r} [384, 3, 3, 384] is 2.5 MiB in "
                               f"FP16, over the limit of 2 MiB (max_tensor_mib)"]


def test_lint_is_bound_to_the_file(small_tflite):
    fp32, fp16 = small_tflite
    assert lint(fp16, require_fp16=True).summary()["sha256"] == sha256_file(fp16) != sha256_file(fp32)


def test_fp32_file_has_no_fp16_weights(small_tflite):
    fp32, _ = small_tflite
    assert lint(fp32, require_fp16=False).ok
    report = lint(fp32, require_fp16=True)
    assert report.problems == ["no FP16 weights: the shipped file must carry FP16 (dequantized) weights"]
    assert main([str(fp32), "--require-fp16"]) == 1


def _convert(module, sample, path):
    import litert_torch

    litert_torch.convert(module.eval(), (sample,)).export(str(path))
    return path


class FiveD(nn.Module):
    def forward(self, x):
        return (x.reshape(1, 2, 3, 4, 5) * 2.0).sum(dim=2)


class Gather(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("index", torch.tensor([3, 1, 2]))

    def forward(self, x):
        return x[:, self.index] * 2.0


def test_rank5_and_gather_are_named_with_shapes(tmp_path):
    report = lint(_convert(FiveD(), torch.randn(1, 120), tmp_path / "5d.tflite"), require_fp16=False)
    assert report.max_rank == 5 and not report.ok
    assert any("rank 5 [1, 2, 3, 4, 5]" in p for p in report.problems)
    report = lint(_convert(Gather(), torch.randn(2, 4), tmp_path / "g.tflite"), require_fp16=False)
    assert any(re.match(r"forbidden op: GATHER(_ND)? inputs \[\[\d+, \d+\], .*\] -> \[\[3, 2\]\]", p)
               for p in report.problems), report.problems


def test_resize_with_both_flags_is_rejected(small_tflite, tmp_path):
    """Flip half_pixel_centers on an align_corners resize in the flatbuffer: the lint must see it."""
    fp32, _ = small_tflite
    model = flatbuffer_utils.read_model(str(fp32))
    flipped = 0
    for op in model.subgraphs[0].operators:
        code = model.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) == schema.BuiltinOperator.RESIZE_BILINEAR:
            assert op.builtinOptions.alignCorners and not op.builtinOptions.halfPixelCenters
            op.builtinOptions.halfPixelCenters = True
            flipped += 1
    out = tmp_path / "both_flags.tflite"
    flatbuffer_utils.write_model(model, str(out))
    report = lint(out, require_fp16=False)
    both = [p for p in report.problems if "align_corners and half_pixel_centers are both set" in p]
    assert len(both) == flipped == 5
    assert all(p.startswith("RESIZE_BILINEAR inputs [[1, ") for p in both)


def test_cli_prints_a_report(small_tflite):
    _, fp16 = small_tflite
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.checks.gpu_lint", str(fp16), "--require-fp16"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["gpu_clean"] is True and report["max_rank"] == 4 and report["op_histogram"]["DEQUANTIZE"] > 0


def test_missing_file_is_an_error(tmp_path):
    missing = tmp_path / "missing.tflite"
    with pytest.raises(FileNotFoundError, match="No such file or directory") as err:
        lint(missing, require_fp16=False)
    assert err.value.filename == str(missing)


class MacOps(torch.nn.Module):
    """A 3x3 conv, a depthwise 3x3 conv, a Linear on the last axis and a matmul: known MACs."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = torch.nn.Linear(20, 16)

    def forward(self, x):
        y = self.fc(self.depthwise(self.conv(x)))  # [1, 8, 12, 16]
        return y @ y.transpose(-1, -2)  # [1, 8, 12, 12]


def test_macs_are_counted_from_the_graph(tmp_path):
    report = lint(_convert(MacOps(), torch.randn(1, 3, 12, 20), tmp_path / "macs.tflite"), require_fp16=False)
    conv, depthwise = 12 * 20 * 8 * 3 * 3 * 3, 12 * 20 * 8 * 3 * 3
    fc, matmul = 8 * 12 * 16 * 20, 8 * 12 * 12 * 16
    assert report.macs == conv + depthwise + fc + matmul, report.op_histogram
    assert report.summary()["macs"] == conv + depthwise + fc + matmul  # what the catalog records
