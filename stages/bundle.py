"""`bundle` stage: every aspect's shipped file in one .tflite, a signature per aspect, the weights stored once.

    python -m stages.bundle

First clears what aspects dropped from params.yaml left behind (da3_litert_farm.ops.prune), then merges
and gates (da3_litert_farm.checks.bundle); artifacts/bundle/ is replaced only if every gate passed.
"""

from __future__ import annotations

import argparse
import sys

from da3_litert_farm.checks.bundle import BundleGateError, build_bundle
from da3_litert_farm.checks.shipped import NotShippableError
from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.convert.tflite_bundle import BundleError
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.gpu.gpu_runtime import GpuError
from da3_litert_farm.ops.prune import prune


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m stages.bundle", description=__doc__.splitlines()[0]).parse_args(argv)
    try:
        params = load_params(checkpoint_files=False)
        for message in prune(set(params.aspects)):
            print(f"bundle: {message}")
        with fileio.atomic_dir(paths.BUNDLE_DIR) as tmp:  # renamed into place only if every gate passed
            record = build_bundle(params, tmp)
            fileio.write_json(tmp / paths.BUNDLE_RECORD.name, record)
    except (ParamsError, NotShippableError, BundleError, GpuError) as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 1
    except BundleGateError as exc:
        for failure in exc.failures:
            print(f"bundle: FAILED {failure}", file=sys.stderr)
        return 1
    gpu = record["gates"]["gpu"]
    gpu_text = (f"GPU: fully accelerated, signature {gpu['signature']} bitwise equal to its file"
                if gpu["checked"] else f"GPU: not checked ({gpu['reason']})")
    print(f"bundle: {len(record['signatures'])} signatures "
          f"({', '.join(s['signature'] for s in record['signatures'])}), {record['bytes'] / 1e6:.1f} MB instead of "
          f"{record['singles_bytes'] / 1e6:.1f} MB ({record['ratio_to_singles']:.2f}x); CPU bitwise equal per "
          f"signature; {gpu_text}; {record['seconds']:.1f} s -> {paths.BUNDLE_MODEL}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
