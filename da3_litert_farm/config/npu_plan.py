"""What params.yaml's npu section will add to a build, before it is built: files, megabytes and minutes.

The figures come from the recorded NPU benchmark of the shipped preset (docs/figures/npu-896x504.json, `make
bench-npu`): its median MB per chip and its compile and simulator seconds, scaled by each cell's pixel count. They are
estimates, said as such with the recording's date and CPU; a preset without a recording gets counts only.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from da3_litert_farm.config.params import Params
from da3_litert_farm.core.host import npu_compile_jobs
from da3_litert_farm.core.models import DEFAULT_PRESET

RECORDING = Path(__file__).resolve().parents[2] / "docs" / "figures" / "npu-896x504.json"


def npu_plan(params: Params, recording: Path = RECORDING) -> list[str]:
    """Lines for `python -m stages.params`: what the NPU stage of every cell will build and, where a recording
    exists, cost."""
    npu = params.npu
    if not npu.targets:
        return ["npu: no NPU files (npu.targets is empty)"]
    cells = list(params.cells.values())
    files = len(cells) * len(npu.targets)
    lines = [f"npu: {len(cells)} cells x {len(npu.targets)} chips ({', '.join(npu.targets)}) = {files} files compiled "
             f"ahead of time; simulated as {', '.join(npu.simulate)} on {', '.join(params.validation.gpu_photos)}"
             + (f", through a proxy at tier {npu.simulate_tier} for cells above it" if npu.simulate_tier else "")]
    try:
        doc = json.loads(recording.read_text())
    except (OSError, ValueError):
        return lines + [f"npu: no cost estimate ({recording.name} not recorded: make bench-npu)"]
    rows = [r for r in doc["figures"] if "compile s" in r]
    height, width = (int(v) for v in rows[0]["shape"].split(" x "))
    compile_s = statistics.median(r["compile s"] for r in rows)
    simulate_s = statistics.median(r["simulator s"] for r in rows if "simulator s" in r)
    megabytes = statistics.median(r["MB"] for r in rows)
    known = [c for c in cells if c.preset == DEFAULT_PRESET]
    scale = sum(c.height * c.width for c in known) / (height * width)
    simulated = [c.proxy_shape(npu.simulate_tier) or c.shape for c in known]  # a proxy is also compiled per chip
    sim_scale = sum(s.height * s.width for s in simulated) / (height * width)
    minutes = (scale * compile_s * math.ceil(len(npu.targets) / npu_compile_jobs(len(npu.targets))) + sim_scale * (simulate_s * len(params.validation.gpu_photos)
               + (compile_s if npu.simulate_tier else 0)) * len(npu.simulate)) / 60
    on = doc["measured_on"]
    lines.append(f"npu: estimate for the {len(known)} {DEFAULT_PRESET} cells: about {megabytes * len(known) * len(npu.targets):.0f} "
                 f"MB of NPU files and {minutes:.0f} min (compiles and simulator runs), scaled by pixels from "
                 f"{recording.name} ({on['date']}, {on['cpu']})")
    if others := len(cells) - len(known):
        lines.append(f"npu: no recording for the other {others} cells' presets: counts only")
    return lines
