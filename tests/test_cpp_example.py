"""examples/cpp: the C++ program, built with g++ against the wheel's libLiteRt.so through LiteRT's C API, runs
one signature of a bundle on the CPU and gives what Python's LiteRT gives, and what the torch module computes;
on the GPU accelerator it sums in the precision it asks for."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import ai_edge_litert
import numpy as np
import pytest
import torch

from da3_litert_farm.convert import tflite_bundle
from da3_litert_farm.convert.export import convert_to_tflite
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.gpu import litert_capi
from da3_litert_farm.gpu.gpu_runtime import GpuModel, accumulation_probe_bytes, prepare_environment
from da3_litert_farm.model.photo_input import load_photo, preprocess

ROOT = Path(__file__).resolve().parents[1]
LIBDIR = Path(ai_edge_litert.__file__).parent
# Two signatures of different shapes, so that running the wrong one cannot pass.
SHAPES = {"land": (14, 28), "port": (28, 14)}


class Head(torch.nn.Module):
    """[1, 3, H, W] -> [1, 1, H, W] = exp(conv): the shape and last step of DA3's depth output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 1, 3, padding=1)

    def forward(self, x):
        return torch.exp(0.5 * self.conv(x))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(binary, bundle, module): the example built, and a two-signature FP16 bundle of a tiny module."""
    out = tmp_path_factory.mktemp("cpp")
    binary = out / "da3_depth"
    subprocess.run(["sh", str(ROOT / "examples/cpp/build.sh"), str(LIBDIR), str(binary)], check=True,
                   capture_output=True, text=True)
    module = Head().eval()
    singles = {}
    for name, shape in SHAPES.items():
        convert_to_tflite(module, *shape, out / f"{name}_fp32.tflite")
        quantize_fp16(out / f"{name}_fp32.tflite", out / f"{name}.tflite")  # FP16 weights, as shipped
        singles[name] = out / f"{name}.tflite"
    bundle = out / "bundle.tflite"
    bundle.write_bytes(tflite_bundle.merge(singles))
    return binary, bundle, module


def run_cpp(binary: Path, *args, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=120, env=env)


def python_litert(bundle: Path, signature: str, x: np.ndarray) -> np.ndarray:
    from ai_edge_litert.compiled_model import CompiledModel

    model = CompiledModel.from_file(str(bundle))  # the CPU
    index = model.get_signature_index(signature)
    inputs, outputs = model.create_input_buffers(index), model.create_output_buffers(index)
    inputs[0].write(x)
    model.run_by_index(index, inputs, outputs)
    return outputs[0].read(x.shape[2] * x.shape[3], np.float32).reshape(1, 1, *x.shape[2:])


def test_cpp_runs_the_chosen_signature_as_python_litert_and_torch_do(built, tmp_path):
    binary, bundle, module = built
    assert tflite_bundle.signature_keys(bundle) == ["land", "port"]
    x = preprocess(load_photo("coffee"), *SHAPES["port"])  # a real photo, preprocessed as an app must
    x.tofile(tmp_path / "in.f32")
    run = run_cpp(binary, bundle, "port", tmp_path / "in.f32", tmp_path / "out.f32")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "signature port (index 1 of 2): input [1, 3, 28, 14] -> output [1, 1, 28, 14] on the cpu" in run.stdout
    ours = np.fromfile(tmp_path / "out.f32", np.float32).reshape(1, 1, *SHAPES["port"])

    # Same library, same CPU kernels (XNNPACK) as the Python API: equal to float32 rounding (measured: bitwise).
    np.testing.assert_allclose(ours, python_litert(bundle, "port", x), rtol=1e-6, atol=0)
    # Independent of LiteRT: the torch module with its weights rounded to FP16, as the shipped file stores them
    # (biases stay FP32); the rest differs by float32 summation order only (measured: 2.4e-7 relative; against
    # the FP32 weights 2.2e-4, so this also says the file's weights are FP16).
    fp16 = Head().eval()
    fp16.conv.weight.data = module.conv.weight.data.half().float()
    with torch.no_grad():
        expected = fp16(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=0)
    assert ours.std() > 0.01 * ours.mean()  # a real photo gives a map, not a constant


def test_cpp_names_the_signatures_and_the_size_it_expects(built, tmp_path):
    binary, bundle, _ = built
    np.zeros((1, 3, *SHAPES["land"]), np.float32).tofile(tmp_path / "land.f32")
    wrong_key = run_cpp(binary, bundle, "9x16", tmp_path / "land.f32", tmp_path / "out.f32")
    assert wrong_key.returncode == 2 and "has no signature '9x16'; it has: land, port" in wrong_key.stderr
    np.zeros(10, np.float32).tofile(tmp_path / "short.f32")
    short = run_cpp(binary, bundle, "port", tmp_path / "short.f32", tmp_path / "out.f32")
    assert short.returncode == 2
    assert "holds 40 bytes; signature 'port' takes float32 [1, 3, 28, 14], 4704 bytes" in short.stderr
    assert not (tmp_path / "out.f32").exists()


def test_cpp_on_the_gpu_sums_in_the_precision_it_asks_for(built, tmp_path):
    """The C++ program on the GPU accelerator (here Mesa's lavapipe), in its default precision and with FP32
    accumulation, the mode a sidecar recommends, set through the C API's opaque GPU options: the accumulation
    probe's 16,384-term sums, computed here in float64, show which arithmetic ran."""
    from ai_edge_litert.tools import flatbuffer_utils

    binary, bundle, _ = built
    probe = tmp_path / "probe.tflite"
    probe.write_bytes(accumulation_probe_bytes())
    flat = flatbuffer_utils.read_model(str(probe))
    (w,) = [t for t in flat.subgraphs[0].tensors if t.name == b"w"]
    weights = np.frombuffer(bytes(flat.buffers[w.buffer].data), np.float32).reshape(w.shape)
    exact = weights.astype(np.float64).sum(axis=1)  # the input is all ones
    np.ones((1, weights.shape[1]), np.float32).tofile(tmp_path / "ones.f32")
    prepare_environment()  # XDG_RUNTIME_DIR, which Dawn's Vulkan backend needs, for the child too
    env = {**os.environ, "LD_LIBRARY_PATH": str(LIBDIR)}  # libLiteRt.so dlopens its GPU accelerator by name
    sums = {}
    for where in ("gpu", "gpu-fp32-accum"):
        run = run_cpp(binary, probe, "serving_default", tmp_path / "ones.f32", tmp_path / f"{where}.f32", where,
                      env=env)
        assert run.returncode == 0 and "no GPU accelerator" not in run.stderr, run.stderr[-2000:]
        sums[where] = np.fromfile(tmp_path / f"{where}.f32", np.float32)
    assert "on the gpu (fp16, fp32 accumulation)" in run.stdout
    np.testing.assert_array_equal(sums["gpu-fp32-accum"], exact.astype(np.float16).astype(np.float32))
    assert np.all(sums["gpu"] != exact.astype(np.float16).astype(np.float32))  # the default sums in FP16

    # A farm file's signature on the GPU, as the farm's Python check runs it (GpuModel): the same numbers.
    x = preprocess(load_photo("coffee"), *SHAPES["land"])
    x.tofile(tmp_path / "in.f32")
    for where, mode in (("gpu", "fp16"), ("gpu-fp32-accum", "fp16_fp32_accum")):
        run = run_cpp(binary, bundle, "land", tmp_path / "in.f32", tmp_path / "out.f32", where, env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        ours = np.fromfile(tmp_path / "out.f32", np.float32).reshape(1, 1, *SHAPES["land"])
        np.testing.assert_array_equal(ours, GpuModel(bundle, mode, signature="land")(x))


@pytest.mark.parametrize("accelerator", ["cpu", "gpu"])
def test_a_bundle_can_prepare_only_the_signature_an_app_runs(built, accelerator):
    """The runtime option C++ RuntimeOptions::SetSelectedSignatures sets, reached through the C API: the other
    signatures are not prepared (their buffer requirements are refused), and the chosen one computes what it
    computes when every signature is prepared, bit for bit."""
    _, bundle, _ = built
    x = preprocess(load_photo("coffee"), *SHAPES["land"])
    outputs = {}
    for only in (False, True):
        model = litert_capi.CompiledModel(bundle, "fp16", "land", only_signature=only, accelerator=accelerator)
        assert model.prepared_signatures() == (["land"] if only else ["land", "port"])
        model.submit(x)
        outputs[only] = model.outputs[0].read()
        model.close()
    np.testing.assert_array_equal(outputs[True], outputs[False])


def test_cpp_runs_an_npu_file_or_falls_back_to_the_gpu_file(built, tmp_path):
    """`npu NPU_FILE GPU_FILE`: the file compiled for a Qualcomm chip where LiteRT's NPU runtime exists (on a phone);
    on this x86 machine it has no dispatch library, so the program says so and runs the cell's GPU file instead,
    giving exactly what the GPU file gives on the GPU."""
    from da3_litert_farm.npu.aot_compiler import compile_for

    binary, bundle, _ = built
    gpu_file = bundle.parent / "land.tflite"
    npu_file = tmp_path / "land-SM8650.tflite"
    assert compile_for(gpu_file, "SM8650", npu_file).fully_on_npu
    x = preprocess(load_photo("coffee"), *SHAPES["land"])
    x.tofile(tmp_path / "in.f32")
    prepare_environment()
    env = {**os.environ, "LD_LIBRARY_PATH": str(LIBDIR)}
    run = run_cpp(binary, npu_file, "serving_default", tmp_path / "in.f32", tmp_path / "npu.f32", "npu", gpu_file,
                  env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"da3_depth: no NPU runtime for {npu_file}; running {gpu_file} on the GPU" in run.stderr
    assert "on the gpu" in run.stdout
    direct = run_cpp(binary, gpu_file, "serving_default", tmp_path / "in.f32", tmp_path / "gpu.f32", "gpu", env=env)
    assert direct.returncode == 0, direct.stderr[-2000:]
    np.testing.assert_array_equal(np.fromfile(tmp_path / "npu.f32", np.float32),
                                  np.fromfile(tmp_path / "gpu.f32", np.float32))
