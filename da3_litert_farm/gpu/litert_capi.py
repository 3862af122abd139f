"""LiteRT's C API (the wheel's libLiteRt.so) through ctypes: the GPU precision, and the one-signature load of a
bundle, that Python cannot ask for.

Why: ai-edge-litert's Python `GpuOptions` sets FP32 (`enforce_f32`) or nothing, and its pybind
module builds the options inside its own statically linked runtime, so nothing can be passed
through it. Apps choose "FP16 storage, FP32 accumulation" (Kotlin `GpuOptions.Precision.
FP16_WITH_FP32_ACCUM`, C++ `GpuOptions::Precision::kFp16WithFp32Accum`, C
`kLiteRtDelegatePrecisionFp16WithFp32Accum` = 3): ML Drift then sums CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, TRANSPOSE_CONV and BATCH_MATMUL in FP32. The wheel's C API reaches it: GPU
options travel to the accelerator as opaque options named "gpu_options" whose data is a TOML
text ("precision = 3"), as the C++ `GpuOptions` writes them (LiteRT 2.2+; libLiteRt.so exports no
setter of its own). Whether the accelerator honoured it is measured, not assumed:
gpu_runtime.arithmetic_precision runs a probe whose answer differs per mode.

Signatures and enum values: LiteRT's public headers (litert/c/*.h) at v2.2.0, unchanged in 2.3.0.
Only float32 tensors, one signature per compiled model: what the farm's files have.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
from pathlib import Path

import numpy as np

from da3_litert_farm.core.errors import FarmError

# LiteRtDelegatePrecision (litert/c/litert_common.h); the value an invalid setting reads past is
# not checked by the accelerator (a negative one crashed it), so only these are ever written.
PRECISION = {"fp16": 1, "fp32": 2, "fp16_fp32_accum": 3}
_HW_CPU, _HW_GPU = 1, 2  # LiteRtHwAccelerators, a bit set
_ENV_RUNTIME_LIBRARY_DIR = 22  # kLiteRtEnvOptionTagRuntimeLibraryDir: where the accelerator .so lies
_ANY_STRING = 8  # kLiteRtAnyTypeString
_LOCK_READ, _LOCK_WRITE = 0, 1  # LiteRtTensorBufferLockMode
_FLOAT32 = 1  # kLiteRtElementTypeFloat32
_MAX_RANK = 8  # LITERT_TENSOR_MAX_RANK


class CapiError(FarmError, RuntimeError):
    """A LiteRT C API call failed; the message names the call and its status."""


class _Any(ctypes.Structure):  # LiteRtAny: a type tag and a union at offset 8
    class _Value(ctypes.Union):
        _fields_ = [("int_value", ctypes.c_int64), ("str_value", ctypes.c_char_p)]
    _fields_ = [("type", ctypes.c_int), ("value", _Value)]


class _EnvOption(ctypes.Structure):  # LiteRtEnvOption
    _fields_ = [("tag", ctypes.c_int), ("value", _Any)]


class _Layout(ctypes.Structure):  # LiteRtLayout
    _fields_ = [("rank", ctypes.c_uint, 7), ("has_strides", ctypes.c_uint, 1),
                ("dimensions", ctypes.c_int32 * _MAX_RANK), ("strides", ctypes.c_uint32 * _MAX_RANK)]


class _RankedTensorType(ctypes.Structure):  # LiteRtRankedTensorType
    _fields_ = [("element_type", ctypes.c_int), ("layout", _Layout)]


# The headers static_assert these sizes: a mismatch means the struct layouts above are wrong.
assert (ctypes.sizeof(_Any), ctypes.sizeof(_EnvOption), ctypes.sizeof(_RankedTensorType)) == (16, 24, 72)

_H, _N, _S = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int  # a handle, LiteRtParamIndex, LiteRtStatus
_P = ctypes.POINTER
_FUNCTIONS = {
    "LiteRtCreateEnvironment": (_S, [ctypes.c_int, _P(_EnvOption), _P(_H)]),
    "LiteRtDestroyEnvironment": (None, [_H]),
    "LiteRtCreateModelFromFile": (_S, [_H, ctypes.c_char_p, _P(_H)]),
    "LiteRtDestroyModel": (None, [_H]),
    "LiteRtGetNumModelSignatures": (_S, [_H, _P(_N)]),
    "LiteRtGetModelSignature": (_S, [_H, _N, _P(_H)]),
    "LiteRtGetSignatureKey": (_S, [_H, _P(ctypes.c_char_p)]),
    "LiteRtGetNumSignatureInputs": (_S, [_H, _P(_N)]),
    "LiteRtGetNumSignatureOutputs": (_S, [_H, _P(_N)]),
    "LiteRtGetSignatureInputTensorByIndex": (_S, [_H, _N, _P(_H)]),
    "LiteRtGetSignatureOutputTensorByIndex": (_S, [_H, _N, _P(_H)]),
    "LiteRtGetRankedTensorType": (_S, [_H, _P(_RankedTensorType)]),
    "LiteRtCreateOptions": (_S, [_P(_H)]),
    "LiteRtDestroyOptions": (None, [_H]),
    "LiteRtSetOptionsHardwareAccelerators": (_S, [_H, ctypes.c_int]),
    "LiteRtCreateOpaqueOptions": (_S, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, _P(_H)]),
    "LiteRtDestroyOpaqueOptions": (None, [_H]),
    "LiteRtAddOpaqueOptions": (_S, [_H, _H]),
    "LiteRtCreateCompiledModel": (_S, [_H, _H, _H, _P(_H)]),
    "LiteRtDestroyCompiledModel": (None, [_H]),
    "LiteRtCompiledModelIsFullyAccelerated": (_S, [_H, _P(ctypes.c_bool)]),
    "LiteRtGetCompiledModelInputBufferRequirements": (_S, [_H, _N, _N, _P(_H)]),
    "LiteRtGetCompiledModelOutputBufferRequirements": (_S, [_H, _N, _N, _P(_H)]),
    "LiteRtCreateManagedTensorBufferFromRequirements": (_S, [_H, _P(_RankedTensorType), _H, _P(_H)]),
    "LiteRtLockTensorBuffer": (_S, [_H, _P(ctypes.c_void_p), ctypes.c_int]),
    "LiteRtUnlockTensorBuffer": (_S, [_H]),
    "LiteRtDestroyTensorBuffer": (None, [_H]),
    "LiteRtRunCompiledModel": (_S, [_H, _N, _N, _P(_H), _N, _P(_H)]),
}


def _wheel_dir() -> Path:
    import ai_edge_litert

    return Path(ai_edge_litert.__file__).resolve().parent


_lib = None


def _api() -> ctypes.CDLL:
    """libLiteRt.so with its functions typed; loaded on first use."""
    global _lib, _libc
    if _lib is None:
        path = _wheel_dir() / "libLiteRt.so"
        lib = ctypes.CDLL(str(path))
        for name, (restype, argtypes) in _FUNCTIONS.items():
            try:
                function = getattr(lib, name)
            except AttributeError:
                raise CapiError(f"{path} lacks {name}: this ai-edge-litert's C API is not the one the farm "
                                f"was written for (2.2/2.3)") from None
            function.restype, function.argtypes = restype, argtypes
        _libc = ctypes.CDLL(ctypes.util.find_library("c"))
        _libc.strdup.restype, _libc.strdup.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
        _lib = lib
    return _lib


_libc = None


def load_library() -> None:
    """Load libLiteRt.so now (it is otherwise loaded at the first model)."""
    _api()


def _check(status: int, call: str) -> None:
    if status != 0:  # kLiteRtStatusOk
        raise CapiError(f"{call} failed with LiteRtStatus {status}")


class CompiledModel:
    """One signature of a .tflite compiled for the GPU accelerator (CPU fallback allowed, as an app
    configures it) with an explicit GPU precision, from `PRECISION`, or for the CPU alone; optionally with
    only that signature prepared. Float32 inputs and outputs."""

    def __init__(self, path: Path | str, precision: str, signature: str | None = None, only_signature: bool = False,
                 accelerator: str = "gpu"):
        """only_signature: prepare only `signature` (the runtime option C++ `RuntimeOptions::SetSelectedSignatures`
        sets, which LiteRT's Kotlin and Python APIs lack), not every signature of a bundle. accelerator: "gpu"
        (with the CPU for any op the GPU rejects, as an app configures it) or "cpu" (XNNPACK alone)."""
        if accelerator not in ("gpu", "cpu"):
            raise ValueError(f"accelerator {accelerator!r}: 'gpu' or 'cpu'")
        api = _api()
        if precision not in PRECISION:
            raise ValueError(f"precision {precision!r}: one of {list(PRECISION)}")
        self._env, self._model, self._options, self._compiled = _H(), _H(), _H(), _H()
        self._buffers: list[_Buffer] = []
        try:
            self._open(api, Path(path), precision, signature, only_signature, accelerator)
        except BaseException:
            self.close()
            raise

    def _open(self, api, path: Path, precision: str, signature: str | None, only_signature: bool,
              accelerator: str) -> None:
        self._library_dir = str(_wheel_dir()).encode()  # read by the environment while it lives
        option = _EnvOption(tag=_ENV_RUNTIME_LIBRARY_DIR)
        option.value.type, option.value.value.str_value = _ANY_STRING, self._library_dir
        _check(api.LiteRtCreateEnvironment(1, ctypes.byref(option), ctypes.byref(self._env)), "LiteRtCreateEnvironment")
        _check(api.LiteRtCreateModelFromFile(self._env, os.fsencode(path), ctypes.byref(self._model)),
               f"LiteRtCreateModelFromFile({path})")
        self.signatures = self._signature_keys(api)
        if signature is not None and signature not in self.signatures:
            raise CapiError(f"{path} has no signature {signature!r}; it has {self.signatures}")
        self.signature = signature or self.signatures[0]
        self._index = self.signatures.index(self.signature)
        _check(api.LiteRtCreateOptions(ctypes.byref(self._options)), "LiteRtCreateOptions")
        _check(api.LiteRtSetOptionsHardwareAccelerators(self._options, _HW_GPU | _HW_CPU if accelerator == "gpu"
                                                        else _HW_CPU), "LiteRtSetOptionsHardwareAccelerators")
        if accelerator == "gpu":
            self._add_opaque(api, b"gpu_options", f"precision = {PRECISION[precision]}\n")
        if only_signature:
            # What LiteRT's C++ RuntimeOptions writes (litert/c/options/litert_runtime_options.cc): a signature
            # key here, as a TOML string, passed JSON-quoted (the same escapes for the keys the farm names).
            self._add_opaque(api, b"runtime_options_string", f"selected_signature_keys = [{json.dumps(self.signature)}]\n")
        _check(api.LiteRtCreateCompiledModel(self._env, self._model, self._options, ctypes.byref(self._compiled)),
               "LiteRtCreateCompiledModel")
        flag = ctypes.c_bool()
        _check(api.LiteRtCompiledModelIsFullyAccelerated(self._compiled, ctypes.byref(flag)),
               "LiteRtCompiledModelIsFullyAccelerated")
        self.fully_accelerated = bool(flag.value)
        handle = _H()
        _check(api.LiteRtGetModelSignature(self._model, self._index, ctypes.byref(handle)), "LiteRtGetModelSignature")
        self.inputs = self._make_buffers(api, handle, "Input")
        self.outputs = self._make_buffers(api, handle, "Output")

    def prepared_signatures(self) -> list[str]:
        """The signatures this compiled model prepared: those whose first input it has buffer requirements for
        (every one, unless only_signature)."""
        api, prepared = _api(), []
        for index, key in enumerate(self.signatures):
            requirements = _H()
            if api.LiteRtGetCompiledModelInputBufferRequirements(self._compiled, index, 0,
                                                                 ctypes.byref(requirements)) == 0:
                prepared.append(key)
        return prepared

    def _add_opaque(self, api, identifier: bytes, toml: str) -> None:
        """Options an accelerator or the runtime reads by name, holding TOML text. The payload is the options' to
        free: a malloc'd copy, with libc's free as its destructor."""
        payload, opaque = _libc.strdup(toml.encode()), _H()
        status = api.LiteRtCreateOpaqueOptions(identifier, payload, ctypes.cast(_libc.free, ctypes.c_void_p),
                                               ctypes.byref(opaque))
        if status != 0:
            _libc.free(ctypes.c_void_p(payload))
        _check(status, f"LiteRtCreateOpaqueOptions({identifier.decode()})")
        status = api.LiteRtAddOpaqueOptions(self._options, opaque)  # on success the options own it
        if status != 0:
            api.LiteRtDestroyOpaqueOptions(opaque)
        _check(status, "LiteRtAddOpaqueOptions")

    def _signature_keys(self, api) -> list[str]:
        count, keys = _N(), []
        _check(api.LiteRtGetNumModelSignatures(self._model, ctypes.byref(count)), "LiteRtGetNumModelSignatures")
        for i in range(count.value):
            handle, key = _H(), ctypes.c_char_p()
            _check(api.LiteRtGetModelSignature(self._model, i, ctypes.byref(handle)), "LiteRtGetModelSignature")
            _check(api.LiteRtGetSignatureKey(handle, ctypes.byref(key)), "LiteRtGetSignatureKey")
            keys.append(key.value.decode())
        return keys

    def _make_buffers(self, api, signature: ctypes.c_void_p, kind: str) -> list[_Buffer]:
        count = _N()
        _check(getattr(api, f"LiteRtGetNumSignature{kind}s")(signature, ctypes.byref(count)), f"count {kind}s")
        made = []
        for i in range(count.value):
            tensor, requirements, tensor_type = _H(), _H(), _RankedTensorType()
            _check(getattr(api, f"LiteRtGetSignature{kind}TensorByIndex")(signature, i, ctypes.byref(tensor)),
                   f"LiteRtGetSignature{kind}TensorByIndex")
            _check(api.LiteRtGetRankedTensorType(tensor, ctypes.byref(tensor_type)), "LiteRtGetRankedTensorType")
            # Requirements belong to the compiled model: not freed here.
            _check(getattr(api, f"LiteRtGetCompiledModel{kind}BufferRequirements")(
                self._compiled, self._index, i, ctypes.byref(requirements)),
                f"LiteRtGetCompiledModel{kind}BufferRequirements")
            buffer = _Buffer(api, self._env, tensor_type, requirements)
            self._buffers.append(buffer)
            made.append(buffer)
        return made

    def submit(self, *arrays: np.ndarray) -> None:
        """Write the inputs and run. On WebGPU this only queues the work: reading an output waits."""
        api = _api()
        for buffer, array in zip(self.inputs, arrays, strict=True):
            buffer.write(array)
        ins = (_H * len(self.inputs))(*[b.handle for b in self.inputs])
        outs = (_H * len(self.outputs))(*[b.handle for b in self.outputs])
        _check(api.LiteRtRunCompiledModel(self._compiled, self._index, len(ins), ins, len(outs), outs),
               "LiteRtRunCompiledModel")

    def close(self) -> None:
        """Release buffers, the compiled model, its options, the model and the environment, in that order."""
        api = _api()
        for buffer in self._buffers:
            buffer.close()
        self._buffers = []
        for handle, destroy in ((self._compiled, api.LiteRtDestroyCompiledModel),
                                (self._options, api.LiteRtDestroyOptions), (self._model, api.LiteRtDestroyModel),
                                (self._env, api.LiteRtDestroyEnvironment)):
            if handle:
                destroy(handle)
                handle.value = None

    def __del__(self) -> None:
        if _lib is not None:
            self.close()


class _Buffer:
    """A tensor buffer the compiled model asked for, written and read through a host mapping."""

    def __init__(self, api, env: ctypes.c_void_p, tensor_type: _RankedTensorType, requirements: ctypes.c_void_p):
        if tensor_type.element_type != _FLOAT32:
            raise CapiError(f"only float32 tensors are handled, not element type {tensor_type.element_type}")
        self.shape = tuple(tensor_type.layout.dimensions[i] for i in range(tensor_type.layout.rank))
        self.handle = _H()
        _check(api.LiteRtCreateManagedTensorBufferFromRequirements(env, ctypes.byref(tensor_type), requirements,
                                                                   ctypes.byref(self.handle)),
               "LiteRtCreateManagedTensorBufferFromRequirements")

    def write(self, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array, np.float32)
        if data.shape != self.shape:
            raise ValueError(f"input {data.shape} != the tensor's {self.shape}")
        self._mapped(_LOCK_WRITE, lambda address: ctypes.memmove(address, data.ctypes.data, data.nbytes))

    def read(self) -> np.ndarray:
        n = int(np.prod(self.shape))
        return self._mapped(_LOCK_READ, lambda address: np.ctypeslib.as_array(
            (ctypes.c_float * n).from_address(address)).copy()).reshape(self.shape)

    def _mapped(self, mode: int, use):
        api, address = _api(), ctypes.c_void_p()
        _check(api.LiteRtLockTensorBuffer(self.handle, ctypes.byref(address), mode), "LiteRtLockTensorBuffer")
        try:
            return use(address.value)
        finally:
            _check(api.LiteRtUnlockTensorBuffer(self.handle), "LiteRtUnlockTensorBuffer")

    def close(self) -> None:
        if self.handle:
            _api().LiteRtDestroyTensorBuffer(self.handle)
            self.handle.value = None
