"""`export@ASPECT` stage: the patched program -> FP32 .tflite with litert-torch.

    python -m stages.export 9x16
"""

from __future__ import annotations

import argparse
import sys

from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.convert.export import export_program_file
from da3_litert_farm.core import fileio, paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.export", description=__doc__.splitlines()[0])
    parser.add_argument("aspect", help="an aspect name in params.yaml")
    args = parser.parse_args(argv)
    try:
        aspect = load_params(checkpoint_files=False).aspect(args.aspect)
    except ParamsError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 1
    out = paths.fp32_model(aspect.name)
    stats = export_program_file(paths.patched_program(aspect.name), out)
    fileio.write_json(paths.export_report(aspect.name), {"aspect": aspect.name, **stats})
    print(f"export {out}: {stats['bytes'] / 1e6:.1f} MB in {stats['seconds']:.1f} s, "
          f"peak RSS {stats['peak_rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
