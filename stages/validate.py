"""`validate@ASPECT` stage: the shipped file on the CPU vs the official PyTorch model, and the GPU lint.

    python -m stages.validate 9x16

Writes metrics.json, lint.json and depth.npz, then exits 1 if a gate failed (da3_litert_farm.checks.validate).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from da3_litert_farm.checks.validate import validate
from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.model.official import CheckpointError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.validate", description=__doc__.splitlines()[0])
    parser.add_argument("aspect", help="an aspect name in params.yaml")
    args = parser.parse_args(argv)
    started = time.time()
    try:
        params = load_params(checkpoint_files=False)
        aspect = params.aspect(args.aspect)
        metrics, lint_summary, maps = validate(aspect, params)
        metrics["seconds"] = time.time() - started
    except (ParamsError, CheckpointError) as exc:
        print(f"validate: {exc}", file=sys.stderr)
        return 1
    with fileio.atomic_path(paths.depth_maps(aspect.name)) as tmp:
        np.savez_compressed(tmp, **maps)  # for the report: what the figures were computed from
    fileio.write_json(paths.lint_report(aspect.name), lint_summary)
    fileio.write_json(paths.metrics(aspect.name), metrics)
    if not metrics["passed"]:
        for failure in metrics["failures"]:
            print(f"validate {aspect.name}: FAILED {failure}", file=sys.stderr)
        return 1
    f, box = metrics["fidelity"], metrics["letterbox"]
    square = (f"; a letterboxed {box['square'][0]}x{box['square'][1]} square instead: pearson {box['pearson_min']:.4f}, "
              f"mean rel {box['mean_rel_error_max']:.1e}, {box['mac_ratio_square_to_native']:.2f}x the MACs"
              if box else "")
    print(f"validate {aspect.name}: {aspect.shape} pearson >= {f['pearson']:.7f} (1-r {f['one_minus_pearson']:.1e}), "
          f"mean rel error <= {f['mean_rel_error']:.1e}, "
          f"{metrics['bytes'] / 1e6:.1f} MB, GPU-clean, {len(f['photos'])} photos{square}, {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
