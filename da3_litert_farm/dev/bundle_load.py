"""What loading the bundle costs an app, per runtime and option, next to one of its single files.

    python -m da3_litert_farm.dev.bundle_load [ASPECT] [--record NAME]

Run in a built farm (after `make farm`). For the CPU (XNNPACK) and the GPU accelerator, each load in a
fresh process (gpu.load_cost): the bundle whole (every signature compiled, as LiteRT's Python and
Kotlin APIs load it), the bundle with only ASPECT's signature prepared (LiteRT's C API runtime option,
which C++ `RuntimeOptions::SetSelectedSignatures` sets), and ASPECT's own file. ASPECT defaults to the
bundle's smallest, the one the bundle stage measures. Nothing else heavy beside it: a software GPU
adapter compiles on the CPU cores.
"""

from __future__ import annotations

import argparse
import json
import sys

from da3_litert_farm.core import paths
from da3_litert_farm.core.cells import split_bundle
from da3_litert_farm.gpu.load_cost import ACCELERATORS, measure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.dev.bundle_load",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("bundle", help="a bundle of the farm, MODEL-TIER (e.g. small-896)")
    parser.add_argument("signature", nargs="?", help="a signature of the bundle, an aspect (default: its smallest)")
    parser.add_argument("--record", metavar="NAME", help="also write the rows to docs/figures/NAME.json")
    args = parser.parse_args(argv)
    record = paths.bundle_record(args.bundle)
    if not record.is_file():
        parser.error(f"no bundle {args.bundle!r} built here ({record} missing)")
    signatures = json.loads(record.read_text())["signatures"]
    aspect = args.signature or min(signatures, key=lambda s: s["height"] * s["width"])["signature"]
    files = {s["signature"]: s["file"] for s in signatures}
    if aspect not in files:
        parser.error(f"{aspect!r} is not a signature of bundle {args.bundle}: {sorted(files)}")
    bundle = paths.bundle_model(args.bundle)
    single = files[aspect]
    rows = []
    for accelerator in ACCELERATORS:
        own = measure(single, accelerator)
        loads = {"bundle, every signature": measure(bundle, accelerator),
                 f"bundle, only {aspect}": measure(bundle, accelerator, aspect),
                 f"{aspect}'s own file": own}
        for load, m in loads.items():
            ratio = round(m["peak_growth_mib"] / own["peak_growth_mib"], 2)
            rows.append({"runtime": accelerator.upper(), "load": load, "seconds": m["seconds"],
                         "peak growth MiB": m["peak_growth_mib"], "x the file's memory": ratio})
            print(f"{accelerator:>4} {load:<28} {m['seconds']:6.2f} s  +{m['peak_growth_mib']:7.1f} MiB  {ratio:.2f}x",
                  flush=True)
    if args.record:
        from da3_litert_farm.dev import figures

        path = figures.record(args.record, rows, figures.command_line("da3_litert_farm.dev.bundle_load", argv),
                              weights=figures.weights_name(json.loads(
                                  paths.provenance(split_bundle(args.bundle)[0]).read_text())))
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
