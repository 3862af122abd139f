"""What loading a .tflite costs an app: seconds and memory, on the CPU or the GPU accelerator.

    python -m da3_litert_farm.gpu.load_cost FILE cpu|gpu [SIGNATURE]     (prints one JSON object)

Each measurement runs in a fresh process, so one load's memory never hides another's: the
process's resident memory after its imports, its peak after the load, and the load's wall
time. The load is what an app does: LiteRT's `CompiledModel` with that accelerator, which
compiles every signature of the file, then its input and output buffers. With SIGNATURE it
prepares that signature only, through LiteRT's C API (gpu.litert_capi), as C++ apps do with
`RuntimeOptions::SetSelectedSignatures` (the Python and Kotlin APIs have no such option).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from da3_litert_farm.core import peak_memory

ACCELERATORS = ("cpu", "gpu")


def peak_rss_mib() -> float:
    """This process's peak resident memory since its exec.

    Linux: VmHWM. Not ru_maxrss, which a child inherits from its parent across fork and exec (a
    measurement started from the farm's own process would read the farm's peak).
    Elsewhere ru_maxrss (bytes on macOS).
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return peak_memory.peak_rss_mib()


def load(path: Path | str, accelerator: str, signature: str | None = None) -> dict:
    import psutil
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import Options

    from da3_litert_farm.gpu import litert_capi
    from da3_litert_farm.gpu.gpu_runtime import GpuModel, prepare_environment

    prepare_environment()
    litert_capi.load_library()  # its own libLiteRt.so, loaded before the baseline like the Python API's
    before = psutil.Process().memory_info().rss / (1 << 20)  # the libraries are loaded by now
    started = time.perf_counter()
    if signature is not None:
        model = litert_capi.CompiledModel(path, "fp16", signature, only_signature=True, accelerator=accelerator)
    elif accelerator == "gpu":
        model = GpuModel(path)
    else:
        model = CompiledModel.from_file(str(path), options=Options(hardware_accelerators=HardwareAccelerator.CPU))
        model.create_input_buffers(0), model.create_output_buffers(0)
    seconds = time.perf_counter() - started
    peak = peak_rss_mib()
    del model
    return {"seconds": round(seconds, 3), "rss_before_mib": round(before, 1), "peak_rss_mib": round(peak, 1),
            "peak_growth_mib": round(peak - before, 1)}


def measure(path: Path | str, accelerator: str, signature: str | None = None) -> dict:
    """`load` in a fresh process."""
    if accelerator not in ACCELERATORS:
        raise ValueError(f"accelerator {accelerator!r} is not one of {ACCELERATORS}")
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.gpu.load_cost", str(path), accelerator,
                           *([signature] if signature else [])], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"loading {path} on the {accelerator} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3) or argv[1] not in ACCELERATORS:
        print(f"usage: python -m da3_litert_farm.gpu.load_cost FILE {'|'.join(ACCELERATORS)} [SIGNATURE]",
              file=sys.stderr)
        return 2
    print(json.dumps(load(*argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
