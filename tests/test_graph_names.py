"""The shipped files' tensor names do not depend on where the code sits in the package."""

import re

from ai_edge_litert.tools import flatbuffer_utils

# What every shipped file has carried since the first build (read from the files built before
# the code moved into sub-packages): the converter names tensors after these module paths.
SHIPPED_PATHS = {"da3_litert_farm.mono_depth", "da3_litert_farm.rewrites"}


def test_tensor_names_carry_the_paths_the_shipped_files_always_had(small_tflite):
    _, fp16 = small_tflite
    names = [t.name.decode() for t in flatbuffer_utils.read_model(str(fp16)).subgraphs[0].tensors]
    paths = {m for name in names for m in re.findall(r"(da3_litert_farm(?:\.\w+)*)\.[A-Z]\w*", name)}
    assert paths == SHIPPED_PATHS
    assert any(name.startswith("da3_litert_farm.mono_depth.MonoDepth/") for name in names)
