"""`gpu@ASPECT` stage: the shipped file on LiteRT's real GPU accelerator, in FP16, vs the official model.

    python -m stages.gpu 9x16

Writes gpu.json and gpu_depth.npz, then exits 1 if a gate failed (da3_litert_farm.checks.gpu). Run it
alone: on a software adapter heavy work beside it can make a GPU read fail.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from da3_litert_farm.checks.gpu import gpu_check
from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.gpu.gpu_runtime import GpuError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("aspect", help="an aspect name in params.yaml")
    args = parser.parse_args(argv)
    try:
        params = load_params(checkpoint_files=False)
        aspect = params.aspect(args.aspect)
        record, depths = gpu_check(aspect, params.validation)
    except (ParamsError, GpuError) as exc:
        print(f"gpu {args.aspect}: {exc}", file=sys.stderr)
        return 1
    with fileio.atomic_path(paths.gpu_depth(aspect.name)) as tmp:
        np.savez_compressed(tmp, **depths)  # what the GPU computed, for the report (none when skipped)
    fileio.write_json(paths.gpu_metrics(aspect.name), record)
    if not record["passed"]:
        for failure in record["failures"]:
            print(f"gpu {aspect.name}: FAILED {failure}", file=sys.stderr)
        return 1
    if not record["checked"]:
        print(f"gpu {aspect.name}: SKIPPED ({record['reason']})")
        return 0
    print(f"gpu {aspect.name}: {aspect.shape} on {record['adapter']['name']} ({record['adapter']['type']}), "
          f"fully accelerated, {record['precision']}: pearson >= {record['pearson_min']:.7f} "
          f"(1-r {1 - record['pearson_min']:.1e}), mean rel error <= {record['mean_rel_max']:.1e}, "
          f"{len(record['photos'])} photo{'s' if len(record['photos']) > 1 else ''} "
          f"({', '.join(record['photos'])}), {record['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
