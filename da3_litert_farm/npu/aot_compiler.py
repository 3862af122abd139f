"""LiteRT's ahead-of-time compiler for Qualcomm NPUs: one .tflite in, one .tflite per chip out, holding the
graph compiled to a QNN context binary behind one DISPATCH_OP.

`ai_edge_litert.aot.aot_compile` runs LiteRT's `apply_plugin_main` with the Qualcomm compiler plugin, which
partitions the graph (the ops QNN takes go to the NPU), compiles each NPU partition for the chip's HTP and
writes the binary into the file. A graph in one partition with every op on the NPU runs with no CPU hop.
"""

from __future__ import annotations

import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils
from flatbuffers import flexbuffers

from da3_litert_farm.core import fileio
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.npu.qnn_host import host_libraries

DISPATCH_OP = "DISPATCH_OP"
_OP_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_ERROR_LOG = re.compile(r"See (\S+\.error) for details")
# What QNN's graph preparation says when it refuses an op: the lines worth a build log.
_QNN_ERROR = re.compile(r'(no properties registered for \S+|could not create op: \S+|<E> [A-Za-z][^"<\n]*?failed[^"<\n]*?\d+)')


class NpuCompileError(FarmError, RuntimeError):
    """The compiler refused the graph for a chip, or left part of it off the NPU; the message says which."""


@dataclass(frozen=True)
class Partition:
    """One DISPATCH_OP of a compiled file: where its QNN context binary sits in the file, and its I/O."""

    name: str  # the QNN graph's name, e.g. qnn_partition_0
    offset: int
    size: int
    inputs: list[tuple[str, list[int]]]  # (tensor name, shape)
    outputs: list[tuple[str, list[int]]]


@dataclass
class Compiled:
    soc: str
    ops_on_npu: int
    ops_total: int
    partitions: int
    cpu_ops: list[str]  # ops left outside the NPU partitions, by name (empty when fully compiled)
    seconds: float
    peak_rss_mib: float  # the compiler process's peak resident memory
    bytes: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def fully_on_npu(self) -> bool:
        return self.ops_on_npu == self.ops_total and self.partitions == 1 and not self.cpu_ops


def compile_for(model: Path, soc: str, out_file: Path) -> Compiled:
    """Compile `model` for Qualcomm chip `soc` (core.npu_targets) into `out_file`, written atomically and only on
    success. Raises NpuCompileError naming the chip and what QNN refused when the compiler fails."""
    from ai_edge_litert.aot import aot_compile
    from ai_edge_litert.aot.vendors.qualcomm import target as qualcomm

    out_file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".npu-", dir=out_file.parent) as tmp, host_libraries(), \
            _PeakChildren(tmp) as peak:
        started = time.time()
        result = aot_compile.aot_compile(str(model), output_dir=tmp, target=qualcomm.Target(qualcomm.SocModel(soc)),
                                         keep_going=True)
        seconds = time.time() - started
        if result.failed_backends or not result.models:
            reasons = [_qnn_errors(message) for _, message in result.failed_backends] or [["no model came back"]]
            raise NpuCompileError(f"Qualcomm {soc}: the compiler refused the graph: {'; '.join(sum(reasons, []))}")
        compiled = result.models[0]
        stats = compiled.partition_stats.subgraph_stats
        made = Path(compiled.path)
        record = Compiled(soc, sum(s.num_ops_offloaded for s in stats), sum(s.num_total_ops for s in stats),
                          sum(s.num_partitions_offloaded for s in stats), cpu_ops(made), seconds, peak.mib,
                          made.stat().st_size)
        with fileio.atomic_path(out_file) as final:
            made.replace(final)
    return record


def cpu_ops(compiled: Path) -> list[str]:
    """The ops of a compiled file that are not NPU partitions (they would run on the CPU), by name."""
    return [name for _, _, _, name in _ops(compiled) if name != DISPATCH_OP]


def partitions(compiled: Path) -> list[Partition]:
    """Every NPU partition of a compiled file, from its DISPATCH_OPs' options."""
    found = []
    for _, graph, op, name in _ops(compiled):
        if name == DISPATCH_OP:
            options = flexbuffers.Loads(bytes(op.customOptions))
            tensors = lambda indices: [(graph.tensors[i].name.decode(), [int(d) for d in graph.tensors[i].shape])
                                       for i in indices if i >= 0]
            found.append(Partition(options["name"], int(options["bytecode_offset"]), int(options["bytecode_size"]),
                                   tensors(op.inputs), tensors(op.outputs)))
    return found


def _ops(compiled: Path):
    """(model, subgraph, op, op name) for every op of the file."""
    model = flatbuffer_utils.read_model(str(compiled))
    for graph in model.subgraphs:
        for op in graph.operators:
            yield model, graph, op, _op_name(model, op)


def _op_name(model, op) -> str:
    code = model.operatorCodes[op.opcodeIndex]
    name = _OP_NAMES.get(max(code.builtinCode, code.deprecatedBuiltinCode), "UNKNOWN")
    return (code.customCode or b"").decode() if name == "CUSTOM" else name


def _qnn_errors(message: str) -> list[str]:
    """What QNN said when it refused: the distinct error lines of the compiler's log (LiteRT leaves it in /tmp,
    thousands of lines; removed once read), else LiteRT's own message."""
    found = _ERROR_LOG.search(message)
    if found is None:
        return [message.strip()]
    log = Path(found[1])
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return [message.strip()]
    log.unlink(missing_ok=True)
    lines = []
    for line in text.splitlines():
        if "ERROR" in line:
            for hit in _QNN_ERROR.findall(line):
                if hit.strip() and hit.strip() not in lines:
                    lines.append(hit.strip())
    return lines[:4] or [message.strip()]


class _PeakChildren:
    """The largest resident memory of this process's children whose command line holds `marker` (the compile's own
    output folder: other compiles may run at once) while the block runs, sampled every 0.1 s: the compiler runs as a
    child, and getrusage's children figure never goes down between compiles."""

    def __init__(self, marker: str):
        self._marker = marker

    def __enter__(self):
        self.mib, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        me = psutil.Process()
        while not self._stop.wait(0.1):
            for child in me.children(recursive=True):
                try:
                    if any(self._marker in arg for arg in child.cmdline()):
                        self.mib = max(self.mib, child.memory_info().rss / (1 << 20))
                except psutil.Error:
                    pass

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False
