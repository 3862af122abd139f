"""`npu@CELL` stage: the shipped file compiled ahead of time for each Qualcomm chip of npu.targets, each checked:
every op in one NPU partition, and on Qualcomm's HTP simulator (npu.simulate) against the official model.

    python -m stages.npu small-896-9x16

Writes artifacts/npu/MODEL/TIER/ASPECT/: SOC.tflite per chip and npu.json, then exits 1 if a gate failed
(da3_litert_farm.checks.npu).
"""

from __future__ import annotations

import sys

from da3_litert_farm.checks.npu import npu_check
from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths


def check(run: stage.Run) -> int | None:
    cell = run.cell
    record = npu_check(cell, run.params.npu, run.params.validation, run.params.max_tensor_mib, run.say)
    record["seconds"] = run.seconds()
    fileio.write_json(paths.npu_record(cell.name), record)
    if not record["passed"]:
        return run.failed(record["failures"])
    if not record["compiled"]:
        print(f"npu {cell.name}: none compiled ({record['reason']})")
    return None


def main(argv: list[str] | None = None) -> int:
    return stage.run("npu", __doc__, check, over="cell", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
