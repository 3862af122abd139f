"""`bundle@BUNDLE` stage: one model's shipped files at one tier in one .tflite (BUNDLE = MODEL-TIER, e.g.
small-896), a signature per aspect, the weights stored once.

    python -m stages.bundle small-896

First clears what aspects dropped from params.yaml left in its folder artifacts/models/MODEL/TIER/
(da3_litert_farm.ops.prune), then merges (da3_litert_farm.convert.tflite_bundle) and gates
(da3_litert_farm.checks.bundle); artifacts/bundles/BUNDLE/ is replaced only if every gate passed.
"""

from __future__ import annotations

import sys

from da3_litert_farm.checks.bundle import BundleGateError, check_bundle
from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.ops.prune import prune_tier


def bundle(run: stage.Run) -> int | None:
    name = run.args.name
    for message in prune_tier(run.params, name):
        print(f"bundle {name}: {message}")
    try:
        with fileio.atomic_dir(paths.bundle_dir(name)) as tmp:  # renamed into place only if every gate passed
            record = check_bundle(run.params, name, tmp)
            fileio.write_json(tmp / paths.BUNDLE_RECORD, record)
    except BundleGateError as exc:
        return run.failed(exc.failures)
    gpu = record["gates"]["gpu"]
    gpu_text = (f"GPU: fully accelerated, signature {gpu['signature']} bitwise equal to its file"
                if gpu["checked"] else f"GPU: not checked ({gpu['reason']})")
    print(f"bundle {name}: {len(record['signatures'])} signatures "
          f"({', '.join(s['signature'] for s in record['signatures'])}), {record['bytes'] / 1e6:.1f} MB instead of "
          f"{record['singles_bytes'] / 1e6:.1f} MB ({record['ratio_to_singles']:.2f}x); CPU bitwise equal per "
          f"signature; {gpu_text}; {record['seconds']:.1f} s -> {paths.bundle_model(name)}")
    return None


def main(argv: list[str] | None = None) -> int:
    return stage.run("bundle", __doc__, bundle, over="bundle", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
