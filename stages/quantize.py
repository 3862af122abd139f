"""`quantize@CELL` stage: FP32 .tflite -> the shipped file, FP16 weights.

    python -m stages.quantize small-896-9x16
"""

from __future__ import annotations

import sys

from da3_litert_farm.config import stage
from da3_litert_farm.convert.quantize import quantize_fp16
from da3_litert_farm.core import fileio, paths


def quantize(run: stage.Run) -> None:
    name = run.cell.name
    src, dst = paths.fp32_model(name), paths.fp16_model(name)
    quantize_fp16(src, dst)
    fileio.write_json(paths.quantize_report(name), {
        "cell": name, "seconds": run.seconds(),
        "fp32_bytes": src.stat().st_size, "fp16_bytes": dst.stat().st_size})
    print(f"quantize {name}: {src.stat().st_size / 1e6:.1f} MB FP32 -> {dst.stat().st_size / 1e6:.1f} MB "
          f"FP16 in {run.seconds():.1f} s")


def main(argv: list[str] | None = None) -> int:
    return stage.run("quantize", __doc__, quantize, over="cell", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
