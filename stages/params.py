"""`params` stage: check params.yaml and write the checked copy each later stage depends on.

    python -m stages.params [--write]

Without --write (what `make farm` runs first) it only checks and prints the planned shapes and what they will cost.
Either refuses a plan this machine cannot hold, before any work (config.cost_plan; FARM_IGNORE_COST=1 builds anyway).
"""

from __future__ import annotations

import os
import sys

from da3_litert_farm.config import cost_plan, stage
from da3_litert_farm.config.npu_plan import npu_plan
from da3_litert_farm.config.params import write_checked
from da3_litert_farm.core.tensor_plan import MIB, plan_tensors


def check(run: stage.Run) -> None:
    params = run.params
    width = max(len(name) for name in params.cells)
    for c in params.cells.values():
        plan = plan_tensors(params.preset(c.model), c.height, c.width, params.max_tensor_mib * MIB)
        chunked = f", attention in chunks of {plan.query_chunk} queries" if plan.query_chunk else ""
        print(f"{c.name:>{width}}  {c.preset}  ratio {c.ratio:>7}  H x W = {c.height} x {c.width}  largest GPU "
              f"tensor {plan.largest_bytes / MIB:.1f} MiB ({plan.largest_name}){chunked}")
    print("\n".join(npu_plan(params)))
    cost = cost_plan.plan(params)
    print("\n".join(cost.lines() if isinstance(cost, cost_plan.Plan) else [cost]))
    cost_plan.enforce(cost, os.environ)  # before write_checked: a refused plan leaves the farm as it was
    if run.args.write:
        write_checked(params)


def flags(parser) -> None:
    parser.add_argument("--write", action="store_true", help="also write artifacts/params/ (the DVC stage)")


def main(argv: list[str] | None = None) -> int:
    return stage.run("params", __doc__, check, checkpoint_files=True, flags=flags, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
