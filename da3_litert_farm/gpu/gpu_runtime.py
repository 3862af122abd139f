"""LiteRT's real GPU accelerator (ML Drift over WebGPU), as the phone's delegate runs a .tflite.

`GpuModel` loads a file with `HardwareAccelerator.GPU` and runs it through the model's own
GPU tensor buffers. By default the delegate computes in FP16 (storage and arithmetic), as on
phones; `enforce_f32=True` asks it for FP32, to tell FP16 error from kernel error.

The adapter is whatever WebGPU (Dawn) selects: a phone or desktop GPU, or, on a machine
without one, Mesa's lavapipe Vulkan driver ("llvmpipe ... CPU / Software"), which also has
`shaderFloat16`. Dawn logs the adapter it picked from native code; we read it back from the
process's stderr, because the Python API does not expose it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from da3_litert_farm.core.errors import FarmError

# Dawn's line, e.g. "Selected adapter: llvmpipe (LLVM 15.0.6, 256 bits), arch=software, vendor=mesa,
# backend=Vulkan, adapterType=CPU / Software".
_ADAPTER_LINE = re.compile(r"Selected adapter: (?P<name>.*?), arch=.*?backend=(?P<backend>\w+), "
                           r"adapterType=(?P<type>[^\n]+)")
_REJECTED_OP = re.compile(r"^(\w+): Operation is not supported", re.MULTILINE)
NO_ADAPTER = "No adapters found"
SETUP_HINT = ("`python -m da3_litert_farm.gpu.gpu_setup` installs a software adapter (Mesa's lavapipe) on Debian/Ubuntu, "
              "or says what to run")


class GpuError(FarmError, RuntimeError):
    """The GPU accelerator could not load or run a model; the message says what to do."""


@dataclass(frozen=True)
class Adapter:
    name: str
    backend: str
    type: str

    def __str__(self) -> str:
        return f"{self.name} ({self.backend}, {self.type})"


def prepare_environment() -> None:
    """Dawn's Vulkan backend wants XDG_RUNTIME_DIR; headless machines and CI often lack it."""
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime_dir = Path(tempfile.gettempdir()) / f"xdg-runtime-{os.getuid()}"
        runtime_dir.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime_dir)


@contextlib.contextmanager
def captured_native_stderr() -> Iterator[list[str]]:
    """Collect what native code writes to fd 2 inside the block (and still show it afterwards)."""
    out: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            out.append(text)
            sys.stderr.write(text)


def parse_adapter(log: str) -> Adapter | None:
    match = _ADAPTER_LINE.search(log)
    if match is None:
        return None
    return Adapter(match["name"].strip(), match["backend"], match["type"].strip())


class GpuModel:
    """One .tflite compiled for the GPU accelerator; runs one signature (one input, float32 I/O).

    The runtime compiles every signature of the file at load, as the Kotlin and Python
    `CompiledModel` do; `signature` picks the one to run (default: the first).
    """

    def __init__(self, path: Path | str, enforce_f32: bool = False, signature: str | None = None):
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.gpu_options import GpuOptions
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator
        from ai_edge_litert.options import Options

        prepare_environment()
        self._enforce_f32 = enforce_f32
        # GPU with CPU fallback, as an app configures it: ops the delegate rejects run on the
        # CPU, and `fully_accelerated` says whether any did (GPU alone refuses the whole file).
        options = Options(hardware_accelerators=HardwareAccelerator.GPU | HardwareAccelerator.CPU,
                          gpu_options=GpuOptions(enforce_f32=enforce_f32))
        failure = None
        with captured_native_stderr() as log:
            try:
                self._model = CompiledModel.from_file(str(path), options=options)
            except Exception as exc:  # the bindings raise plain RuntimeError/ValueError
                failure = str(exc).strip()
        if failure is not None:
            if NO_ADAPTER in log[0]:
                failure = f"WebGPU found no adapter (no GPU, and no Vulkan driver it accepts). {SETUP_HINT}"
            raise GpuError(f"LiteRT could not compile {path} for the GPU accelerator: {failure}")
        self.adapter = parse_adapter(log[0])
        self.fully_accelerated = bool(self._model.is_fully_accelerated())
        self.rejected_ops = sorted(set(_REJECTED_OP.findall(log[0])))
        signatures = list(self._model.get_signature_list())
        if signature is not None and signature not in signatures:
            raise GpuError(f"{path} has no signature {signature!r}; it has {signatures}")
        self.signature = signature or signatures[0]
        self._index = signatures.index(self.signature)
        (details,) = self._model.get_input_tensor_details(self.signature).values()
        self.input_shape = tuple(int(d) for d in details["shape"])
        self.output_shapes = [tuple(int(d) for d in details["shape"])
                              for details in self._model.get_output_tensor_details(self.signature).values()]
        self._inputs = self._model.create_input_buffers(self._index)
        self._outputs = self._model.create_output_buffers(self._index)
        self._used = False
        self.last_run: dict[str, float] = {}

    @property
    def precision(self) -> str:
        """'fp16' or 'fp32': what this adapter's arithmetic is, measured (not what was asked)."""
        return arithmetic_precision(self._enforce_f32)

    def __call__(self, image: np.ndarray) -> np.ndarray:
        """Run a one-output model once: its output."""
        if len(self.output_shapes) != 1:
            raise ValueError(f"the model has {len(self.output_shapes)} outputs: use run_all")
        return self.run_all(image)[0]

    def run_all(self, image: np.ndarray) -> list[np.ndarray]:
        """Run once and read every output back, in the signature's order. A buffer that failed
        to read stays locked, so a GpuModel that failed once is not reused."""
        if self._used is None:
            raise GpuError("this GpuModel failed earlier; load the file again")
        image = np.ascontiguousarray(image, np.float32)
        if image.shape != self.input_shape:
            raise ValueError(f"input {image.shape} != model input {self.input_shape}")
        started = time.perf_counter()
        self._inputs[0].write(image)
        self._model.run_by_index(self._index, self._inputs, self._outputs)
        submitted = time.perf_counter()
        busy = wait_until_cpu_idle()
        drained = time.perf_counter()
        try:
            outs = [buffer.read(int(np.prod(shape)), np.float32)
                    for buffer, shape in zip(self._outputs, self.output_shapes)]
            # Where one run's time went (da3_litert_farm.dev.bench_gpu): writing the input and
            # submitting, the queue's work, making sure it is done, reading the outputs back.
            self.last_run = {"submit_s": submitted - started, "queue_s": busy,
                             "idle_wait_s": drained - submitted - busy, "read_s": time.perf_counter() - drained}
        except Exception as exc:
            self._used = None
            raise GpuError(
                f"reading the GPU output failed ({exc}). The runtime waits at most 120 s for a read; on a "
                "software adapter other heavy processes sharing the CPU cores can stall the queue that "
                "long: run the GPU check alone (dvc repro gpu@ASPECT)"
            ) from None
        return [np.asarray(out, np.float32).reshape(shape) for out, shape in zip(outs, self.output_shapes)]


def wait_until_cpu_idle(interval: float = 1.0, idle_cores: float = 0.1, idle_samples: int = 2,
                        ceiling: float = 3600.0) -> float:
    """Wait until this process stops using the CPU (a software adapter finished its queue).

    Why: `run_by_index` only submits the work; reading the output maps the buffer and the
    runtime waits at most 120 s for that (measured: every failing read ends at 120.4 s, with
    "Failed to lock custom tensor buffer", and the buffer stays locked). On lavapipe the
    queue runs on this process's threads at about 2 cores: one inference at 896x504 takes
    80-130 s on 2 cores, so a read issued right away times out. Reading once the queue has
    drained returns at once (measured: 0.0 s after 195 s of GPU work). On a hardware GPU the
    CPU is idle from the start, this returns after `idle_samples` intervals, and the read
    waits for the GPU as usual.

    Returns the seconds until the process went quiet (the queue's work, to within one
    `interval`); the call itself lasts `idle_samples` intervals longer, to be sure.
    """
    started = time.monotonic()
    quiet, quiet_since = 0, started
    last_cpu, last = time.process_time(), started
    while quiet < idle_samples and time.monotonic() - started < ceiling:
        time.sleep(interval)
        cpu, now = time.process_time(), time.monotonic()
        if (cpu - last_cpu) / (now - last) < idle_cores:
            quiet, quiet_since = quiet + 1, quiet_since if quiet else last
        else:
            quiet = 0
        last_cpu, last = cpu, now
    return quiet_since - started if quiet >= idle_samples else time.monotonic() - started


def one_op_model_bytes(op: str, x_shape: tuple[int, ...], y_shape: tuple[int, ...],
                       options: tuple[str, object] | None = None, constant: np.ndarray | None = None) -> bytes:
    """A .tflite of one float32 op: y = op(x, x), or y = op(x, constant); built from the flatbuffer schema.

    `op` is a BuiltinOperator name, `options` (BuiltinOptions name, its options object)."""
    from ai_edge_litert import schema_py_generated as s
    from ai_edge_litert.tools import flatbuffer_utils

    def tensor(name: str, shape: tuple[int, ...], buffer: int) -> s.TensorT:
        t = s.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shape), s.TensorType.FLOAT32, buffer
        return t

    def tensor_map(name: str, index: int) -> s.TensorMapT:
        m = s.TensorMapT()
        m.name, m.tensorIndex = name, index
        return m

    code = s.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = getattr(s.BuiltinOperator, op)
    graph = s.SubGraphT()
    graph.tensors = [tensor("x", x_shape, 1), tensor("y", y_shape, 2)]
    buffers = [s.BufferT() for _ in range(3)]
    second = 0
    if constant is not None:
        graph.tensors.append(tensor("w", constant.shape, 3))
        buffers.append(s.BufferT())
        buffers[3].data = np.frombuffer(np.ascontiguousarray(constant, np.float32).tobytes(), np.uint8)
        second = 2
    operator = s.OperatorT()
    operator.opcodeIndex, operator.inputs, operator.outputs = 0, [0, second], [1]
    if options is not None:
        operator.builtinOptionsType, operator.builtinOptions = getattr(s.BuiltinOptions, options[0]), options[1]
    graph.inputs, graph.outputs, graph.operators = [0], [1], [operator]
    signature = s.SignatureDefT()
    signature.signatureKey, signature.subgraphIndex = "serving_default", 0
    signature.inputs, signature.outputs = [tensor_map("x", 0)], [tensor_map("y", 1)]
    model = s.ModelT()
    model.version, model.description = 3, f"one {op}"
    model.operatorCodes, model.subgraphs, model.signatureDefs, model.buffers = [code], [graph], [signature], buffers
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def probe_model_bytes() -> bytes:
    """A minimal GPU graph: y = x + x on [1, 8, 8, 4]."""
    from ai_edge_litert import schema_py_generated as s

    return one_op_model_bytes("ADD", (1, 8, 8, 4), (1, 8, 8, 4), ("AddOptions", s.AddOptionsT()))


# 1 + 2**-12 needs 13 significant bits: FP16 (11) rounds it to 1, so x + x is exactly 2 there, and
# 2 + 2**-11 in FP32 (24).
_NOT_IN_FP16 = 1 + 2.0 ** -12


@functools.lru_cache(maxsize=None)
def arithmetic_precision(enforce_f32: bool = False) -> str:
    """'fp16' or 'fp32': the precision the accelerator really computes in here, from the probe graph
    on a value FP16 cannot hold. ML Drift computes in FP16 only where the adapter offers it (WebGPU's
    shader-f16: Vulkan's shaderFloat16); elsewhere it falls back to FP32 without a word, e.g. on
    SwiftShader, the software Vulkan driver that ships with Chromium."""
    model = probe_model(enforce_f32)
    y = model(np.full(model.input_shape, _NOT_IN_FP16, np.float32))
    if np.all(y == 2.0):
        return "fp16"
    if np.allclose(y, 2 * _NOT_IN_FP16, rtol=0, atol=2.0 ** -20):
        return "fp32"
    raise GpuError(f"the precision probe returned {np.unique(y)[:4]} for 2 x {_NOT_IN_FP16}: neither FP16 nor FP32")


def probe_model(enforce_f32: bool = False) -> GpuModel:
    """The probe graph, loaded on the GPU accelerator (its file only lives while it loads)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.tflite"
        path.write_bytes(probe_model_bytes())
        return GpuModel(path, enforce_f32=enforce_f32)


def probe() -> tuple[Adapter | None, str]:
    """Load and run the probe graph on the GPU accelerator: (adapter, problem or '')."""
    try:
        model = probe_model()
        x = np.arange(256, dtype=np.float32).reshape(model.input_shape)
        y = model(x)
    except (GpuError, ValueError) as exc:
        return None, str(exc)
    if model.adapter is None:
        return None, "WebGPU found no adapter (no GPU and no usable Vulkan driver)"
    if not model.fully_accelerated:
        return model.adapter, "the probe graph did not run on the GPU accelerator"
    if not np.array_equal(y.ravel(), 2 * x.ravel()):
        return model.adapter, "the probe graph ran but returned wrong values"
    return model.adapter, ""
