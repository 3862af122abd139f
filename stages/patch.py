"""`patch@ASPECT` stage: the official model -> the GPU-clean program for one aspect, checked exact.

    python -m stages.patch 9x16
"""

from __future__ import annotations

import argparse
import sys
import time

from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.model.official import CheckpointError
from da3_litert_farm.model.patch import NotExactError, export_program, patch_model, shipped_options
from da3_litert_farm.model.weights import load_official_from_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.patch", description=__doc__.splitlines()[0])
    parser.add_argument("aspect", help="an aspect name in params.yaml")
    args = parser.parse_args(argv)
    started = time.time()
    try:
        params = load_params(checkpoint_files=False)
        aspect = params.aspect(args.aspect)
        options = shipped_options(aspect.height, aspect.width, params.max_tensor_mib)
        official = load_official_from_dir(paths.CHECKPOINT_DIR)
        mono, report = patch_model(official, aspect.height, aspect.width, options)
        export_program(mono, paths.patched_program(aspect.name))
        fileio.write_json(paths.patch_report(aspect.name),
                          {"aspect": aspect.name, **report, "seconds": time.time() - started})
    except (ParamsError, CheckpointError, NotExactError) as exc:
        print(f"patch: {exc}", file=sys.stderr)
        return 1
    chunk = options.attention_query_chunk
    chunking = f", attention in chunks of {chunk} queries" if chunk else ""
    print(f"patch {aspect.name}: {aspect.shape} exact to {report['relative_error']:.1e} of the depth range"
          f"{chunking} ({time.time() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
