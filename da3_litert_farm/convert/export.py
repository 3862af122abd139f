"""The patched torch.export program -> FP32 .tflite with litert-torch (run by stages/export.py).

    python -m da3_litert_farm.convert.export --program P.pt2 --out M.tflite

converts one saved program in a process of its own, so that its peak RSS is the conversion's
(da3_litert_farm.dev.bench).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from pathlib import Path

import torch

from da3_litert_farm.core import fileio, peak_memory
from da3_litert_farm.core.errors import FarmError, first_line


class ExportError(FarmError, RuntimeError):
    """The patched program could not be loaded or converted; the message names the file and the step."""


def convert_to_tflite(module: torch.nn.Module, height: int, width: int, out: Path | str) -> None:
    """Convert a [1,3,H,W] -> [1,1,H,W] module (in eval mode) to a .tflite file, written atomically."""
    import litert_torch  # heavy import (JAX, MLIR): only where a conversion happens

    sample = (torch.zeros(1, 3, height, width),)
    try:
        edge_model = litert_torch.convert(module, sample)
        with fileio.atomic_path(out) as tmp:
            edge_model.export(str(tmp))
    except Exception as exc:  # litert-torch's own errors (MLIR, lowering) run to pages: its first line says which
        raise ExportError(f"litert-torch could not convert a {height}x{width} module to {out}: "
                          f"{first_line(exc)}") from exc


def export_program_file(program: Path | str, out: Path | str) -> dict:
    """Load a saved patched program, convert it, report time and this process's peak RSS."""
    started = time.time()
    try:
        with _quiet("torch.export"):  # it logs a traceback of its first try before raising
            module = torch.export.load(str(program)).module()
    except Exception as exc:
        raise ExportError(f"{program} is not a loadable torch.export program (rerun the patch stage): "
                          f"{first_line(exc)}") from exc
    # The graph was traced from a module in eval mode; the unlifted module just keeps the
    # default flag (and `.eval()` is not implemented on it), so say so for the converter.
    module.training = False
    height, width = _input_hw(module)
    convert_to_tflite(module, height, width, out)
    return {
        "seconds": time.time() - started,
        "peak_rss_mb": peak_memory.peak_rss_mib(),
        "bytes": Path(out).stat().st_size,
    }


def _input_hw(module: torch.nn.Module) -> tuple[int, int]:
    """The fixed input shape recorded in the exported graph's placeholder."""
    for node in module.graph.nodes:
        if node.op == "placeholder" and "val" in node.meta and len(node.meta["val"].shape) == 4:
            _, _, h, w = node.meta["val"].shape
            return int(h), int(w)
    raise ExportError("the program has no [1, 3, H, W] input")


@contextlib.contextmanager
def _quiet(logger: str):
    """Hold back a library logger's warnings: the error raised says what went wrong, in one line."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a saved patched program -> FP32 .tflite")
    parser.add_argument("--program", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    stats = export_program_file(args.program, args.out)
    print(f"export {args.out}: {stats['bytes'] / 1e6:.1f} MB in {stats['seconds']:.1f} s, "
          f"peak RSS {stats['peak_rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
