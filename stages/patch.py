"""`patch@CELL` stage: the official model -> the GPU-clean program for one cell (model, tier, aspect), checked exact.

    python -m stages.patch small-896-9x16
"""

from __future__ import annotations

import sys

from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.model.patch import export_program, patch_model, shipped_options
from da3_litert_farm.model.weights import load_official_from_dir


def patch(run: stage.Run) -> None:
    cell = run.cell
    options = shipped_options(run.params.preset(cell.model), cell.height, cell.width, run.params.max_tensor_mib)
    official = load_official_from_dir(paths.checkpoint_dir(cell.model))
    mono, report = patch_model(official, cell.height, cell.width, options)
    export_program(mono, paths.patched_program(cell.name))
    fileio.write_json(paths.patch_report(cell.name), {"cell": cell.name, **report, "seconds": run.seconds()})
    chunk = options.attention_query_chunk
    chunking = f", attention in chunks of {chunk} queries" if chunk else ""
    print(f"patch {cell.name}: {cell.shape} exact to {report['relative_error']:.1e} of the depth range"
          f"{chunking} ({run.seconds():.1f} s)")


def main(argv: list[str] | None = None) -> int:
    return stage.run("patch", __doc__, patch, over="cell", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
