"""`gpu@CELL` stage: the shipped file on LiteRT's real GPU accelerator, in FP16 (and each other mode of
validation.gpu_modes), vs the official model.

    python -m stages.gpu small-896-9x16

Writes gpu.json and gpu_depth.npz, then exits 1 if a gate failed (da3_litert_farm.checks.gpu). Run it
alone: on a software adapter heavy work beside it can make a GPU read fail.
"""

from __future__ import annotations

import sys

import numpy as np

from da3_litert_farm.checks.gpu import gpu_check
from da3_litert_farm.config import stage
from da3_litert_farm.config.cost_model import expected
from da3_litert_farm.core import fileio, paths


def check(run: stage.Run) -> int | None:
    cell, v = run.cell, run.params.validation
    if v.gpu != "skip":
        runs = len(v.gpu_modes) * len(v.gpu_photos)
        estimate = expected(cell.preset, cell.height, cell.width, "GPU s", runs)
        run.say(f"{cell.shape} in {len(v.gpu_modes)} GPU mode(s) ({', '.join(v.gpu_modes)}) on "
                f"{len(v.gpu_photos)} photo(s) ({', '.join(v.gpu_photos)})" + (f"; {estimate}" if estimate else ""))
    record, depths = gpu_check(cell, v, run.say)
    with fileio.atomic_path(paths.gpu_depth(cell.name)) as tmp:
        np.savez_compressed(tmp, **depths)  # what the GPU computed, for the report (none when skipped)
    fileio.write_json(paths.gpu_metrics(cell.name), record)
    if not record["passed"]:
        return run.failed(record["failures"])
    if not record["checked"]:
        print(f"gpu {cell.name}: SKIPPED ({record['reason']})")
        return None
    print(f"gpu {cell.name}: {cell.shape} on {record['adapter']['name']} ({record['adapter']['type']}), "
          f"fully accelerated, {record['precision']}: pearson >= {record['pearson_min']:.7f} "
          f"(1-r {1 - record['pearson_min']:.1e}), mean rel error <= {record['mean_rel_max']:.1e}, "
          f"{len(record['photos'])} photo{'s' if len(record['photos']) > 1 else ''} "
          f"({', '.join(record['photos'])}), {record['seconds']:.1f} s")
    for mode, m in record.get("modes", {}).items():
        print(f"gpu {cell.name}: {mode}: pearson >= {m['pearson_min']:.7f} (1-r {1 - m['pearson_min']:.1e}), "
              f"mean rel error <= {m['mean_rel_max']:.1e}, {m['seconds']:.1f} s")
    print(f"gpu {cell.name}: recommended GPU mode for apps: {record['recommended_mode']}")
    return None


def main(argv: list[str] | None = None) -> int:
    return stage.run("gpu", __doc__, check, over="cell", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
