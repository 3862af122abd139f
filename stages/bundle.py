"""`bundle` stage: every aspect's shipped file in one .tflite, a signature per aspect, the weights stored once.

    python -m stages.bundle

First clears what aspects dropped from params.yaml left behind (da3_litert_farm.ops.prune), then merges
(da3_litert_farm.convert.tflite_bundle) and gates (da3_litert_farm.checks.bundle); artifacts/bundle/ is replaced only if every gate passed.
"""

from __future__ import annotations

import sys

from da3_litert_farm.checks.bundle import BundleGateError, check_bundle
from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.ops.prune import prune


def bundle(run: stage.Run) -> int | None:
    for message in prune(set(run.params.aspects)):
        print(f"bundle: {message}")
    try:
        with fileio.atomic_dir(paths.BUNDLE_DIR) as tmp:  # renamed into place only if every gate passed
            record = check_bundle(run.params, tmp)
            fileio.write_json(tmp / paths.BUNDLE_RECORD.name, record)
    except BundleGateError as exc:
        return run.failed(exc.failures)
    gpu = record["gates"]["gpu"]
    gpu_text = (f"GPU: fully accelerated, signature {gpu['signature']} bitwise equal to its file"
                if gpu["checked"] else f"GPU: not checked ({gpu['reason']})")
    print(f"bundle: {len(record['signatures'])} signatures "
          f"({', '.join(s['signature'] for s in record['signatures'])}), {record['bytes'] / 1e6:.1f} MB instead of "
          f"{record['singles_bytes'] / 1e6:.1f} MB ({record['ratio_to_singles']:.2f}x); CPU bitwise equal per "
          f"signature; {gpu_text}; {record['seconds']:.1f} s -> {paths.BUNDLE_MODEL}")
    return None


def main(argv: list[str] | None = None) -> int:
    return stage.run("bundle", __doc__, bundle, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
