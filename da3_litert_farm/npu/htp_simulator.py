"""Run a compiled file's QNN context binary on Qualcomm's HTP simulator, on this x86 machine.

LiteRT's own NPU runtime has no x86 dispatch library, so it cannot run here. onnxruntime-qnn can: its QNN
execution provider loads a context binary wrapped in a one-node ONNX model (an `EPContext` node of domain
com.microsoft holding the binary's bytes), and with libQnnHtp.so as its backend on x86 it executes the binary on
the HTP simulator, told which chip to be (SoC id and HTP arch). What runs is the compiled binary itself: corrupt
it and the output is garbage (tests/test_npu.py). The simulator does not check that the binary was compiled for
the chip it is told to be, and it says nothing of speed on a phone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.npu_targets import QUALCOMM, simulable
from da3_litert_farm.npu.aot_compiler import partitions
from da3_litert_farm.npu.qnn_host import host_dir

_EP = "QNNExecutionProvider"


class SimulatorError(FarmError, RuntimeError):
    """The simulator cannot run this file as this chip; the message says why."""


def context_model(compiled: Path) -> bytes:
    """The ONNX model that hands a compiled file's one NPU partition to onnxruntime's QNN provider."""
    import onnx
    from onnx import TensorProto, helper

    found = partitions(compiled)
    if len(found) != 1:
        raise SimulatorError(f"{compiled} has {len(found)} NPU partitions; the simulator check takes one")
    part = found[0]
    with open(compiled, "rb") as f:
        f.seek(part.offset)
        binary = f.read(part.size)
    if len(binary) != part.size:
        raise SimulatorError(f"{compiled} is shorter than its NPU partition says ({part.offset} + {part.size} bytes)")
    ins = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in part.inputs]
    outs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in part.outputs]
    node = helper.make_node("EPContext", [n for n, _ in part.inputs], [n for n, _ in part.outputs], name=part.name,
                            domain="com.microsoft", embed_mode=1, ep_cache_context=binary, source="QNN")
    graph = helper.make_graph([node], part.name, ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


class HtpSimulator:
    """A compiled file loaded on the HTP simulator as chip `soc`: call it on an NCHW float32 input."""

    def __init__(self, compiled: Path, soc: str):
        import onnxruntime as ort

        if not simulable(soc):
            raise SimulatorError(f"the farm does not know {soc}'s SoC id and HTP arch (core/npu_targets.py), so the "
                                 f"simulator cannot be set up as it; simulate one of "
                                 f"{[n for n in QUALCOMM if simulable(n)]}")
        chip = QUALCOMM[soc]
        folder = host_dir()
        _register(ort, folder)
        devices = [d for d in ort.get_ep_devices() if d.ep_name == _EP]
        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only: the provider warns on every load about Windows-only features
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        options.add_provider_for_devices(devices, {"backend_path": str(folder / "libQnnHtp.so"),
                                                   "soc_model": str(chip.soc_id), "htp_arch": str(chip.htp_arch)})
        try:
            self.session = ort.InferenceSession(context_model(compiled), sess_options=options)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise SimulatorError(f"the HTP simulator could not load {compiled} as {soc}: "
                                 f"{str(exc).splitlines()[0]}") from None
        self.input = self.session.get_inputs()[0].name

    def __call__(self, image: np.ndarray) -> np.ndarray:
        try:
            return self.session.run(None, {self.input: np.ascontiguousarray(image, np.float32)})[0]
        except Exception as exc:  # onnxruntime raises its own untyped errors (a broken binary, say)
            raise SimulatorError(f"the HTP simulator failed to run: {str(exc).splitlines()[0]}") from None


_registered: set[str] = set()


def _register(ort, folder: Path) -> None:
    """Register onnxruntime-qnn's provider library with onnxruntime once per process."""
    library = str(folder / "libonnxruntime_providers_qnn.so")
    if library not in _registered:
        ort.register_execution_provider_library(_EP, library)
        _registered.add(library)
