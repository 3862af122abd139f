"""The tensor-size plan is the converted graph's own: checked against the real flatbuffer."""

from ai_edge_litert.tools import flatbuffer_utils

from da3_litert_farm.checks.gpu_lint import lint
from da3_litert_farm.core.models import PRESETS
from da3_litert_farm.core.tensor_plan import MIB, fp16_bytes, plan_tensors, query_chunk_for
from tests.conftest import SMALL


def graph_shapes(path) -> set[tuple[int, ...]]:
    model = flatbuffer_utils.read_model(str(path))
    return {tuple(int(d) for d in t.shape) for t in model.subgraphs[0].tensors if t.shape is not None}


def test_every_planned_tensor_is_in_the_converted_graph(small_tflite):
    _, fp16 = small_tflite
    plan = plan_tensors(PRESETS["da3-small"], *SMALL, 128 * MIB)
    shapes = graph_shapes(fp16)
    for name, shape in plan.shapes.items():
        assert shape in shapes, (name, shape)
    report = lint(fp16, require_fp16=True, max_tensor_bytes=128 * MIB)
    assert report.largest_tensor["fp16_bytes"] == plan.largest_bytes
    assert tuple(report.largest_tensor["shape"]) == plan.shapes[plan.largest_name]


def test_fp16_bytes_pads_the_last_axis_to_four():
    assert fp16_bytes([1, 6, 4097, 4097]) == 2 * 6 * 4097 * 4100
    assert fp16_bytes([1, 896, 504, 1]) == 2 * 896 * 504 * 4


def test_query_chunks_are_balanced_and_fit():
    assert query_chunk_for(2305, 6, 128 * MIB) is None  # 896x504: 61 MiB of scores, no chunking
    chunk = query_chunk_for(4097, 6, 128 * MIB)  # 896x896: 192 MiB unchunked
    assert chunk == 2049 and fp16_bytes([1, 6, chunk, 4097]) <= 128 * MIB
    chunk = query_chunk_for(20737, 6, 128 * MIB)
    assert fp16_bytes([1, 6, chunk, 20737]) <= 128 * MIB
