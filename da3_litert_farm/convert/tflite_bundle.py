"""Merge single-signature .tflite files into one, a signature per aspect, each buffer stored once.

Read and written with LiteRT's own flatbuffer schema bindings (`ai_edge_litert.schema_py_generated`,
through `ai_edge_litert.tools.flatbuffer_utils`), never by hand-parsing bytes.

The merge copies every file's subgraph as it is: the same operators, tensors and signature
(renamed to the aspect), only the indices of operator codes and buffers change. Buffers with
the same bytes become one buffer, which is what stores the FP16 weights once: every aspect
converted from the same checkpoint carries byte-identical weights. `subgraph_structure`
describes a subgraph without indices, so a bundle's subgraph can be compared with its single file.
`build_bundle` writes the bundle of the shipped files and says what each one weighs in it; the
gates that check it against its single files are da3_litert_farm.checks.bundle.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from da3_litert_farm.core import paths
from da3_litert_farm.core.errors import FarmError


class BundleError(FarmError, ValueError):
    """The files cannot be merged; the message names the aspect and the reason."""


@dataclass(frozen=True)
class FileBytes:
    """Where one file's bytes go: FP16 weights (from the checkpoint, the same at every shape when
    built from the same weights), and everything else (FP32 constants such as biases and the
    per-shape tables, plus the graph itself): the most an aspect can legitimately add to a bundle."""

    total: int
    fp16_weights: int

    @property
    def shape_part(self) -> int:
        return self.total - self.fp16_weights


@dataclass(frozen=True)
class Bundle:
    """A bundle as written: its file and size, and what each aspect's single file weighs in it."""

    file: Path
    bytes: int
    parts: dict[str, FileBytes]  # per aspect: its single file's bytes, FP16 weights and the rest
    own: dict[str, int]  # per aspect: the bytes of its single file that no other aspect's holds


def build_bundle(files: dict[str, Path], out_dir: Path) -> Bundle:
    """Merge the shipped files (aspect -> single-signature .tflite) into `out_dir`'s bundle file."""
    # Signatures in name order: the same aspects give the same file, whatever order they come in.
    ordered = {name: Path(files[name]) for name in sorted(files)}
    bundle_file = Path(out_dir) / paths.BUNDLE_FILE
    bundle_file.write_bytes(merge(ordered))
    return Bundle(bundle_file, bundle_file.stat().st_size, {name: file_bytes(path) for name, path in ordered.items()},
                  own_bytes(ordered))


def read(path: Path | str):
    """The file as a `ModelT` (flatbuffer object API)."""
    from ai_edge_litert.tools import flatbuffer_utils

    return flatbuffer_utils.read_model_from_bytearray(bytearray(Path(path).read_bytes()))


def _buffer_bytes(model, index: int) -> bytes:
    data = model.buffers[index].data
    return b"" if data is None else bytes(np.asarray(data, dtype=np.uint8))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_bytes(path: Path | str) -> FileBytes:
    from ai_edge_litert import schema_py_generated as schema

    model = read(path)
    fp16 = {t.buffer for g in model.subgraphs for t in g.tensors if t.type == schema.TensorType.FLOAT16}
    return FileBytes(Path(path).stat().st_size, sum(len(_buffer_bytes(model, b)) for b in fp16 if b))


def own_bytes(files: dict[str, Path]) -> dict[str, int]:
    """Per file, the bytes of its buffers that no other file holds: what it adds to a bundle."""
    sizes = {}
    for key, path in files.items():
        model = read(path)
        sizes[key] = {_digest(d): len(d) for d in (_buffer_bytes(model, i) for i in range(len(model.buffers))) if d}
    return {key: sum(n for digest, n in mine.items() if not any(digest in other for k, other in sizes.items()
                                                                if k != key))
            for key, mine in sizes.items()}


def merge(files: dict[str, Path]) -> bytes:
    """One model with a signature per entry of `files` (key -> single-signature .tflite), in order."""
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    if not files:
        raise BundleError("nothing to bundle: no aspects")
    merged = schema.ModelT()
    merged.version = 3
    merged.description = "DA3 LiteRT bundle: " + ", ".join(files)
    merged.operatorCodes, merged.subgraphs, merged.signatureDefs, merged.metadata = [], [], [], []
    merged.buffers = [schema.BufferT()]  # buffer 0: the empty buffer, by convention
    codes: dict[tuple, int] = {}
    buffers: dict[str, int] = {}
    metadata: dict[bytes, tuple[str, bytes]] = {}

    def buffer_index(model, index: int) -> int:
        data = _buffer_bytes(model, index)
        if not data:
            return 0
        key = _digest(data)
        if key not in buffers:
            buffers[key] = len(merged.buffers)
            merged.buffers.append(schema.BufferT())
            # An exact ndarray: the bindings pack it in one copy (anything else byte by byte).
            merged.buffers[-1].data = np.frombuffer(data, dtype=np.uint8)
        return buffers[key]

    for aspect, path in files.items():
        model = read(path)
        if len(model.subgraphs) != 1 or len(model.signatureDefs or []) != 1:
            raise BundleError(f"aspect {aspect}: {path} has {len(model.subgraphs)} subgraphs and "
                              f"{len(model.signatureDefs or [])} signatures; a bundle merges single-signature files")
        code_index = []
        for code in model.operatorCodes:
            key = (code.deprecatedBuiltinCode, code.builtinCode, code.customCode, code.version)
            if key not in codes:
                codes[key] = len(merged.operatorCodes)
                merged.operatorCodes.append(code)
            code_index.append(codes[key])
        (graph,) = model.subgraphs
        for tensor in graph.tensors:
            tensor.buffer = buffer_index(model, tensor.buffer)
        for op in graph.operators:
            op.opcodeIndex = code_index[op.opcodeIndex]
        graph.name = aspect
        (signature,) = model.signatureDefs
        signature.signatureKey, signature.subgraphIndex = aspect, len(merged.subgraphs)
        merged.subgraphs.append(graph)
        merged.signatureDefs.append(signature)
        for entry in model.metadata or []:
            data = _buffer_bytes(model, entry.buffer)
            if entry.name in metadata and metadata[entry.name][1] != data:
                other = metadata[entry.name][0]
                raise BundleError(f"aspect {aspect}: metadata {entry.name.decode()!r} differs from aspect {other}'s; "
                                  "the files were not made by the same converter")
            if entry.name not in metadata:
                metadata[entry.name] = (aspect, data)
                entry.buffer = buffer_index(model, entry.buffer)
                merged.metadata.append(entry)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(merged))


def signature_keys(path: Path | str) -> list[str]:
    return [s.signatureKey.decode() for s in read(path).signatureDefs]


def subgraph_structure(model, signature: str | None = None) -> dict:
    """A subgraph without indices into the model: every operator (code, inputs, outputs, options),
    every tensor (name, type, shape, its buffer's sha256) and the signature's names. Two subgraphs
    with equal structures compute the same function with the same constants."""
    if signature is None:
        (sig,) = model.signatureDefs
    else:
        matches = [s for s in model.signatureDefs if s.signatureKey.decode() == signature]
        if not matches:
            raise BundleError(f"no signature {signature!r} in the model")
        (sig,) = matches
    graph = model.subgraphs[sig.subgraphIndex]
    return {
        "inputs": list(graph.inputs), "outputs": list(graph.outputs),
        "signature": {"inputs": [(m.name, m.tensorIndex) for m in sig.inputs],
                      "outputs": [(m.name, m.tensorIndex) for m in sig.outputs]},
        "tensors": [{**_plain(t), "buffer": _digest(_buffer_bytes(model, t.buffer)) if t.buffer else None}
                    for t in graph.tensors],
        "operators": [{**_plain(op), "opcodeIndex": _plain(model.operatorCodes[op.opcodeIndex])}
                      for op in graph.operators],
    }


def _plain(value):
    """Flatbuffer objects as nested dicts and lists (for comparing two of them)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "__dict__"):
        return {k: _plain(v) for k, v in sorted(vars(value).items())}
    return value
