"""LiteRT's real GPU accelerator (ML Drift over WebGPU), as the phone's delegate runs a .tflite.

`GpuModel` loads a file with `HardwareAccelerator.GPU` and runs it through the model's own
GPU tensor buffers. By default the delegate computes in FP16 (storage and arithmetic), as on
phones; other MODES ask for FP32 accumulation (what an app can choose) or FP32 throughout (to tell
FP16 error from kernel error).

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
from da3_litert_farm.core.gpu_modes import MODES

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
    """Collect what native code writes to fd 2 inside the block (and write it to fd 2 afterwards: where a stage
    sends native output, its log file, not the terminal; config.native_log)."""
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
            data = sink.read()
            out.append(data.decode(errors="replace"))
            with open(2, "wb", closefd=False) as fd2:
                fd2.write(data)


def parse_adapter(log: str) -> Adapter | None:
    match = _ADAPTER_LINE.search(log)
    if match is None:
        return None
    return Adapter(match["name"].strip(), match["backend"], match["type"].strip())



class GpuModel:
    """One .tflite compiled for the GPU accelerator in one of core.gpu_modes.MODES (fp16_fp32_accum
    through the C API, the others through ai-edge-litert's Python API); runs one signature (one input,
    float32 I/O).

    The runtime compiles every signature of the file at load, as the Kotlin and Python
    `CompiledModel` do; `signature` picks the one to run (default: the first).
    """

    def __init__(self, path: Path | str, mode: str = "fp16", signature: str | None = None):
        if mode not in MODES:
            raise ValueError(f"GPU mode {mode!r}: one of {list(MODES)}")
        prepare_environment()
        self.mode = mode
        failure = None
        with captured_native_stderr() as log:
            try:
                self._runtime = (_CapiRuntime if mode == "fp16_fp32_accum" else _PythonRuntime)(path, mode, signature)
            except GpuError:
                raise
            except Exception as exc:  # the bindings raise plain RuntimeError/ValueError
                failure = str(exc).strip()
        if failure is not None:
            if NO_ADAPTER in log[0]:
                failure = f"WebGPU found no adapter (no GPU, and no Vulkan driver it accepts). {SETUP_HINT}"
            raise GpuError(f"LiteRT could not compile {path} for the GPU accelerator: {failure}")
        self.adapter = parse_adapter(log[0])
        self.fully_accelerated = self._runtime.fully_accelerated
        self.rejected_ops = sorted(set(_REJECTED_OP.findall(log[0])))
        self.signature = self._runtime.signature
        self.input_shape = self._runtime.input_shape
        self.output_shapes = self._runtime.output_shapes
        self._used = False
        self.last_run: dict[str, float] = {}

    @property
    def precision(self) -> str:
        """This mode's arithmetic on this adapter, measured (not what was asked): one of MODES."""
        return arithmetic_precision(self.mode)

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
        self._runtime.submit(image)
        submitted = time.perf_counter()
        busy = wait_until_cpu_idle()
        drained = time.perf_counter()
        try:
            outs = self._runtime.read_outputs()
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


class _PythonRuntime:
    """ai-edge-litert's CompiledModel: FP16 (no GPU options, as an app's default) or enforce_f32."""

    def __init__(self, path: Path | str, mode: str, signature: str | None):
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.gpu_options import GpuOptions
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator
        from ai_edge_litert.options import Options

        # GPU with CPU fallback, as an app configures it: ops the delegate rejects run on the
        # CPU, and `fully_accelerated` says whether any did (GPU alone refuses the whole file).
        options = Options(hardware_accelerators=HardwareAccelerator.GPU | HardwareAccelerator.CPU,
                          gpu_options=GpuOptions(enforce_f32=mode == "fp32"))
        self._model = CompiledModel.from_file(str(path), options=options)
        self.fully_accelerated = bool(self._model.is_fully_accelerated())
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

    def submit(self, image: np.ndarray) -> None:
        self._inputs[0].write(image)
        self._model.run_by_index(self._index, self._inputs, self._outputs)

    def read_outputs(self) -> list[np.ndarray]:
        return [buffer.read(int(np.prod(shape)), np.float32) for buffer, shape in zip(self._outputs, self.output_shapes)]


class _CapiRuntime:
    """LiteRT's C API (gpu.litert_capi), for the precision the Python API cannot set."""

    def __init__(self, path: Path | str, mode: str, signature: str | None):
        from da3_litert_farm.gpu import litert_capi

        try:
            self._model = litert_capi.CompiledModel(path, mode, signature)
        except litert_capi.CapiError as exc:
            raise GpuError(str(exc)) from None
        self.fully_accelerated = self._model.fully_accelerated
        self.signature = self._model.signature
        (self.input_shape,) = [b.shape for b in self._model.inputs]
        self.output_shapes = [b.shape for b in self._model.outputs]

    def submit(self, image: np.ndarray) -> None:
        self._model.submit(image)

    def read_outputs(self) -> list[np.ndarray]:
        return [b.read() for b in self._model.outputs]


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


# The arithmetic probe: one FULLY_CONNECTED of K ones with weights FP16 holds exactly, K - 1 of
# them t = 1 + 3 * 2**-10 and the last t + 1/4, so the exact sum is 16384 t + 1/4 = 16432.25. In
# FP32 that is the answer; summed in FP32 and stored in FP16 (spacing 16 there) it is 16432; summed
# in FP16 each term's 3 * 2**-10 falls under half a unit in the last place once a partial sum
# passes a few units, so no split of the sum into partials ends at 16432 (lavapipe: 16400).
_ACCUMULATION_TERMS = 16384
_TERM = 1 + 3 * 2.0 ** -10
_SUMS = {16432.25: "fp32", 16432.0: "fp16_fp32_accum"}


def accumulation_probe_bytes() -> bytes:
    """y[1, 4] = x[1, K] . W[4, K]^T, each row of W the probe's terms."""
    from ai_edge_litert import schema_py_generated as s

    weights = np.full((4, _ACCUMULATION_TERMS), _TERM, np.float32)
    weights[:, -1] += 0.25
    return one_op_model_bytes("FULLY_CONNECTED", (1, _ACCUMULATION_TERMS), (1, 4),
                              ("FullyConnectedOptions", s.FullyConnectedOptionsT()), weights)


@functools.lru_cache(maxsize=None)
def arithmetic_precision(mode: str = "fp16") -> str:
    """One of MODES: how the accelerator really sums and stores in `mode` here, from the probe.
    ML Drift computes in FP16 only where the adapter offers it (WebGPU's shader-f16: Vulkan's
    shaderFloat16); elsewhere it falls back to FP32 without a word, e.g. on SwiftShader, the
    software Vulkan driver that ships with Chromium. A runtime that ignores the FP32-accumulation
    option reads as 'fp16'."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "accumulation_probe.tflite"
        path.write_bytes(accumulation_probe_bytes())
        model = GpuModel(path, mode)
    y = model(np.ones(model.input_shape, np.float32))
    if len(set(y.ravel().tolist())) != 1:
        raise GpuError(f"the accumulation probe returned {np.unique(y)} for four equal sums")
    return _SUMS.get(float(y.ravel()[0]), "fp16")


def probe_model_bytes() -> bytes:
    """A minimal GPU graph: y = x + x on [1, 8, 8, 4]."""
    from ai_edge_litert import schema_py_generated as s

    return one_op_model_bytes("ADD", (1, 8, 8, 4), (1, 8, 8, 4), ("AddOptions", s.AddOptionsT()))


def probe_model() -> GpuModel:
    """The setup probe's graph, loaded on the GPU accelerator (its file only lives while it loads)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.tflite"
        path.write_bytes(probe_model_bytes())
        return GpuModel(path)


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
