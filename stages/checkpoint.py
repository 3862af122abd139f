"""`checkpoint@MODEL` stage: a model's weights, once, in artifacts/checkpoints/MODEL/ in the Hub layout, with
provenance.json.

    python -m stages.checkpoint small
"""

from __future__ import annotations

import os
import sys

from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.model.checkpoint import build_checkpoint


def checkpoint(run: stage.Run) -> None:
    with fileio.atomic_dir(paths.checkpoint_dir(run.model)) as tmp:
        provenance = build_checkpoint(run.params.models[run.model], tmp, key=f"models.{run.model}")
        fileio.write_json(tmp / paths.provenance(run.model).name, provenance)
    print(f"checkpoint {run.model}: {provenance['source']} weights sha256 {provenance['weights_sha256'][:16]}... "
          f"in {run.seconds():.1f} s")


def main(argv: list[str] | None = None) -> int:
    return stage.run("checkpoint", __doc__, checkpoint, over="model", checkpoint_files=True, argv=argv)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    sys.exit(main())
