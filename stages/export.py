"""`export@CELL` stage: the patched program -> FP32 .tflite with litert-torch.

    python -m stages.export small-896-9x16
"""

from __future__ import annotations

import sys

from da3_litert_farm.config import stage
from da3_litert_farm.config.cost_model import expected
from da3_litert_farm.convert.export import export_program_file
from da3_litert_farm.core import fileio, paths


def export(run: stage.Run) -> None:
    cell = run.cell
    name = cell.name
    out = paths.fp32_model(name)
    estimate = expected(cell.preset, cell.height, cell.width, "export s")
    run.say("converting with litert-torch" + (f"; {estimate}" if estimate else ""))
    stats = export_program_file(paths.patched_program(name), out)
    fileio.write_json(paths.export_report(name), {"cell": name, **stats})
    print(f"export {out}: {stats['bytes'] / 1e6:.1f} MB in {stats['seconds']:.1f} s, "
          f"peak RSS {stats['peak_rss_mb']:.0f} MB")


def main(argv: list[str] | None = None) -> int:
    return stage.run("export", __doc__, export, over="cell", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
