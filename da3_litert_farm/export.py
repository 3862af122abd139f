"""Export stage: the patched torch.export program -> FP32 .tflite with litert-torch.

    python -m da3_litert_farm.export 9x16
    python -m da3_litert_farm.export --program P.pt2 --out M.tflite     (explicit paths, for the benchmark)
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

from da3_litert_farm import fileio, paths
from da3_litert_farm.params import ParamsError, stage_aspect


def convert_to_tflite(module: torch.nn.Module, height: int, width: int, out: Path | str) -> None:
    """Convert a [1,3,H,W] -> [1,1,H,W] module (in eval mode) to a .tflite file, written atomically."""
    import litert_torch  # heavy import (JAX, MLIR): only where a conversion happens

    sample = (torch.zeros(1, 3, height, width),)
    edge_model = litert_torch.convert(module, sample)
    with fileio.atomic_path(out) as tmp:
        edge_model.export(str(tmp))


def export_program_file(program: Path | str, out: Path | str) -> dict:
    """Load a saved patched program, convert it, report time and this process's peak RSS."""
    started = time.time()
    module = torch.export.load(str(program)).module()
    # The graph was traced from a module in eval mode; the unlifted module just keeps the
    # default flag (and `.eval()` is not implemented on it), so say so for the converter.
    module.training = False
    height, width = _input_hw(module)
    convert_to_tflite(module, height, width, out)
    return {
        "seconds": time.time() - started,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "bytes": Path(out).stat().st_size,
    }


def _input_hw(module: torch.nn.Module) -> tuple[int, int]:
    """The fixed input shape recorded in the exported graph's placeholder."""
    for node in module.graph.nodes:
        if node.op == "placeholder" and "val" in node.meta and len(node.meta["val"].shape) == 4:
            _, _, h, w = node.meta["val"].shape
            return int(h), int(w)
    raise ValueError("the program has no [1, 3, H, W] input")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="patched program -> FP32 .tflite")
    parser.add_argument("aspect", nargs="?")
    parser.add_argument("--program")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    try:
        if args.aspect:
            _, aspect = stage_aspect("export", [args.aspect])
            program, out = paths.patched_program(aspect.name), paths.fp32_model(aspect.name)
        elif args.program and args.out:
            program, out = Path(args.program), Path(args.out)
        else:
            parser.error("give an ASPECT, or --program and --out")
        stats = export_program_file(program, out)
        if args.aspect:
            fileio.write_json(paths.export_report(aspect.name), {"aspect": aspect.name, **stats})
    except ParamsError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 1
    print(f"export {out}: {stats['bytes'] / 1e6:.1f} MB in {stats['seconds']:.1f} s, "
          f"peak RSS {stats['peak_rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
