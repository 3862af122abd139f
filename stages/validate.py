"""`validate@CELL` stage: the shipped file on the CPU vs the official PyTorch model, and the GPU lint.

    python -m stages.validate small-896-9x16

Writes metrics.json, lint.json and depth.npz, then exits 1 if a gate failed (da3_litert_farm.checks.validate).
"""

from __future__ import annotations

import sys

import numpy as np

from da3_litert_farm.checks.validate import validate
from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths


def check(run: stage.Run) -> int | None:
    cell = run.cell
    metrics, lint_summary, maps = validate(cell, run.params)
    metrics["seconds"] = run.seconds()
    with fileio.atomic_path(paths.depth_maps(cell.name)) as tmp:
        np.savez_compressed(tmp, **maps)  # for the report: what the figures were computed from
    fileio.write_json(paths.lint_report(cell.name), lint_summary)
    fileio.write_json(paths.metrics(cell.name), metrics)
    if not metrics["passed"]:
        return run.failed(metrics["failures"])
    f, box = metrics["fidelity"], metrics["letterbox"]
    square = (f"; a letterboxed {box['square'][0]}x{box['square'][1]} square instead: pearson {box['pearson_min']:.4f}, "
              f"mean rel {box['mean_rel_error_max']:.1e}, {box['mac_ratio_square_to_native']:.2f}x the MACs"
              if box else "")
    print(f"validate {cell.name}: {cell.shape} pearson >= {f['pearson']:.7f} (1-r {f['one_minus_pearson']:.1e}), "
          f"mean rel error <= {f['mean_rel_error']:.1e}, "
          f"{metrics['bytes'] / 1e6:.1f} MB, GPU-clean, {len(f['photos'])} photos{square}, {run.seconds():.1f} s")
    return None


def main(argv: list[str] | None = None) -> int:
    return stage.run("validate", __doc__, check, over="cell", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
