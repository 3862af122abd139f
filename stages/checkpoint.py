"""`checkpoint` stage: the weights, once, in artifacts/checkpoint/ in the Hub layout, with provenance.json.

    python -m stages.checkpoint
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.model.checkpoint import build_checkpoint
from da3_litert_farm.model.official import CheckpointError


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m stages.checkpoint", description=__doc__.splitlines()[0]).parse_args(argv)
    started = time.time()
    try:
        params = load_params()
        with fileio.atomic_dir(paths.CHECKPOINT_DIR) as tmp:
            provenance = build_checkpoint(params.checkpoint, tmp)
            fileio.write_json(tmp / paths.PROVENANCE.name, provenance)
    except (ParamsError, CheckpointError) as exc:
        print(f"checkpoint: {exc}", file=sys.stderr)
        return 1
    print(f"checkpoint: {provenance['source']} weights sha256 {provenance['weights_sha256'][:16]}... "
          f"in {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    sys.exit(main())
