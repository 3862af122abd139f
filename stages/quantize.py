"""`quantize@ASPECT` stage: FP32 .tflite -> the shipped file, FP16 weights.

    python -m stages.quantize 9x16
"""

from __future__ import annotations

import argparse
import sys
import time

from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.core import fileio, paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.quantize", description=__doc__.splitlines()[0])
    parser.add_argument("aspect", help="an aspect name in params.yaml")
    args = parser.parse_args(argv)
    started = time.time()
    try:
        aspect = load_params(checkpoint_files=False).aspect(args.aspect)
    except ParamsError as exc:
        print(f"quantize: {exc}", file=sys.stderr)
        return 1
    src, dst = paths.fp32_model(aspect.name), paths.fp16_model(aspect.name)
    quantize_fp16(src, dst)
    fileio.write_json(paths.quantize_report(aspect.name), {
        "aspect": aspect.name, "seconds": time.time() - started,
        "fp32_bytes": src.stat().st_size, "fp16_bytes": dst.stat().st_size})
    print(f"quantize {aspect.name}: {src.stat().st_size / 1e6:.1f} MB FP32 -> {dst.stat().st_size / 1e6:.1f} MB "
          f"FP16 in {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
