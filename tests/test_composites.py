"""A runtime limit the farm works around, watched: ai-edge-litert 2.3.0's GPU accelerator crashes loading a file that
carries a composite ML Drift would reduce in FP32 (docs/gpu-fidelity.md, FP32 accumulation). The day this test
fails, the runtime loads composites: try LayerNorm and attention as composites in the rewrites."""

import signal
import subprocess
import sys

import numpy as np
import torch

from da3_litert_farm.checks.fidelity import TFLiteModel

WIDTH = 64

LOAD_ON_GPU = """
import sys
import numpy as np
from da3_litert_farm.gpu.gpu_runtime import GpuModel
model = GpuModel(sys.argv[1])
print("loaded", model.fully_accelerated, model(np.ones(model.input_shape, np.float32)).ravel()[:2])
"""


class CompositeLayerNorm(torch.nn.Module):
    """LayerNorm as litert-torch marks it for the GPU: one `odml.group_norm` composite."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(WIDTH)
        with torch.no_grad():
            self.norm.weight.copy_(torch.linspace(0.5, 1.5, WIDTH))
            self.norm.bias.copy_(torch.linspace(-0.1, 0.1, WIDTH))

    def forward(self, x):
        from litert_torch.generative.layers.normalization import layer_norm_with_hlfb

        return layer_norm_with_hlfb(x, [WIDTH], self.norm.weight, self.norm.bias, self.norm.eps)


def main_graph_ops(path) -> list[str]:
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    names = {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    model = flatbuffer_utils.read_model(str(path))
    return [names[max(model.operatorCodes[op.opcodeIndex].builtinCode,
                      model.operatorCodes[op.opcodeIndex].deprecatedBuiltinCode)]
            for op in model.subgraphs[0].operators]


def test_the_gpu_accelerator_crashes_loading_a_layernorm_composite(tmp_path):
    import litert_torch

    module = CompositeLayerNorm().eval()
    x = torch.randn(1, 16, WIDTH, generator=torch.Generator().manual_seed(0)) * 8
    path = tmp_path / "layernorm_composite.tflite"
    litert_torch.convert(module, (x,)).export(str(path))
    assert main_graph_ops(path) == ["STABLEHLO_COMPOSITE"]  # its body, the decomposed ops, is a subgraph of its own
    with torch.no_grad():
        expected = torch.nn.functional.layer_norm(x, [WIDTH], module.norm.weight, module.norm.bias).numpy()
    np.testing.assert_allclose(TFLiteModel(path)(x.numpy()), expected, atol=1e-5)  # the CPU runs it right
    loaded = subprocess.run([sys.executable, "-c", LOAD_ON_GPU, str(path)], capture_output=True, text=True, timeout=300)
    assert loaded.returncode == -signal.SIGSEGV, (
        f"the GPU accelerator now loads a composite (exit {loaded.returncode}: {loaded.stdout.strip()}): revisit "
        f"docs/gpu-fidelity.md and try the composites in the rewrites")
