"""NPU stage: compile the shipped file for each Qualcomm chip of npu.targets, and check the compiled graph on the
HTP simulator for each chip of npu.simulate.

Run by the DVC stage in stages/npu.py.

The shipped FP16 file is what is compiled: the NPU computes in FP16 whichever weights it is given, and the binary
compiled from the FP32 file measured the same (docs/npu.md), so every NPU file descends from the one file that
validate@CELL and gpu@CELL checked (its sha256 is recorded). Gates: every op in one NPU partition, on every chip;
on each simulated chip, the output on validation.gpu_photos within npu.min_pearson and npu.max_mean_rel of the
official FP32 model (the maps validate@CELL saved in depth.npz), and finite; a cell above npu.simulate_tier is
simulated through its proxy at that tier instead (checks.npu_proxy). Agreement with the CPU file
(XNNPACK) is recorded too. A chip that fails stops the cell from reaching the catalog with NPU files.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import numpy as np

from da3_litert_farm.checks.agreement import compare, gate_fidelity
from da3_litert_farm.checks.npu_proxy import SimulatedFile, simulated_file
from da3_litert_farm.config.params import NpuParams, ValidationParams
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.core.cells import Cell
from da3_litert_farm.core.host import npu_compile_jobs
from da3_litert_farm.core.npu_targets import QUALCOMM
from da3_litert_farm.npu.aot_compiler import Compiled, NpuCompileError, compile_for
from da3_litert_farm.npu.htp_simulator import HtpSimulator, SimulatorError
from da3_litert_farm.npu.qnn_host import qairt_version

GATE_KEYS = ("npu.min_pearson", "npu.max_mean_rel")


def npu_check(cell: Cell, npu: NpuParams, validation: ValidationParams, max_tensor_mib: int, say=print) -> dict:
    """Compile and check one cell; returns the npu.json record (its `passed` and `failures` say how it went).
    `say` gets one line per step: the stage runs for minutes."""
    shipped = paths.fp16_model(cell.name)
    head = {"cell": cell.name, "source": shipped.as_posix(), "source_sha256": fileio.sha256_file(shipped)}
    if not npu.targets:
        return {**head, "compiled": False, "reason": "npu.targets is empty in params.yaml", "targets": {},
                "passed": True, "failures": []}
    with tempfile.TemporaryDirectory(prefix="npu-proxy-") as work:
        return _compile_and_simulate(cell, shipped, npu, validation, max_tensor_mib, head, Path(work), say)


def _compile_and_simulate(cell: Cell, shipped: Path, npu: NpuParams, validation: ValidationParams,
                          max_tensor_mib: int, head: dict, work: Path, say) -> dict:
    sim_file = simulated_file(cell, npu.simulate_tier, max_tensor_mib, validation.gpu_photos, work, say)
    record = {**head, "compiled": True, "compiler": f"ai-edge-litert {metadata.version('ai-edge-litert')}",
              "qairt": qairt_version(), "targets": {}, "failures": []}
    compiles = compile_targets(shipped, cell.name, npu.targets, say)
    for soc in npu.targets:
        out, compiled = paths.npu_model(cell.name, soc), compiles[soc]
        if isinstance(compiled, NpuCompileError):
            record["targets"][soc] = {"compiled": False, "error": str(compiled)}
            record["failures"].append(str(compiled))
            say(f"{soc}: FAILED {compiled}")
            continue
        entry = target_entry(compiled, out)
        say(f"{soc}: {compiled.ops_on_npu}/{compiled.ops_total} ops on the NPU in {compiled.partitions} "
            f"partition(s), {compiled.bytes / 1e6:.1f} MB, {compiled.seconds:.0f} s, {compiled.peak_rss_mib:.0f} MiB")
        if not compiled.fully_on_npu:
            left = ", ".join(f"{n} x{k}" for n, k in Counter(compiled.cpu_ops).most_common()) or "none"
            record["failures"].append(f"Qualcomm {soc}: {compiled.ops_on_npu} of {compiled.ops_total} ops on the NPU "
                                      f"in {compiled.partitions} partitions, not all in one; ops left on the CPU: {left}")
        if soc in npu.simulate and compiled.fully_on_npu:
            entry["simulator"] = simulate_chip(sim_file, out, soc, npu, work, say)
            record["failures"] += [f"Qualcomm {soc} on the HTP simulator: {f}" for f in entry["simulator"]["failures"]]
            sim = entry["simulator"]
            if sim["photos"]:
                say(f"{soc}: simulator 1 - r {1 - sim['pearson_min']:.1e}, mean rel error {sim['mean_rel_max']:.1e} "
                    f"vs the official model, {sim['seconds']:.0f} s")
        record["targets"][soc] = entry
    record["passed"] = not record["failures"]
    return record


def compile_targets(shipped: Path, cell: str, targets: tuple[str, ...], say) -> dict[str, Compiled | NpuCompileError]:
    """The shipped file compiled for every chip, core.host.npu_compile_jobs() at a time: each chip's record, or why it failed."""
    jobs = npu_compile_jobs(len(targets))
    say(f"compiling for {', '.join(f'Qualcomm {soc} ({QUALCOMM[soc].product})' for soc in targets)}, {jobs} at a time")

    def one(soc: str) -> Compiled | NpuCompileError:
        try:
            return compile_for(shipped, soc, paths.npu_model(cell, soc))
        except NpuCompileError as exc:
            return exc

    with ThreadPoolExecutor(jobs) as pool:
        return dict(zip(targets, pool.map(one, targets)))


def simulate_chip(sim_file: SimulatedFile, compiled_shipped: Path, soc: str, npu: NpuParams, work: Path, say) -> dict:
    """The simulator's run for chip `soc`: of the shipped binary, or of the proxy's, compiled here for `soc`."""
    what = f"the proxy at {sim_file.shape}" if sim_file.proxy else "the shipped binary"
    binary = compiled_shipped
    if sim_file.proxy:
        binary = work / f"proxy-{soc}.tflite"
        try:
            compile_for(sim_file.file, soc, binary)
        except NpuCompileError as exc:
            return {"photos": {}, "failures": [f"the proxy at {sim_file.shape} did not compile: {exc}"],
                    "passed": False, "seconds": 0.0, "shape": str(sim_file.shape), "proxy": True}
    say(f"{soc}: running {what} on the HTP simulator ({', '.join(sim_file.refs)})")
    sim = simulate(binary, soc, sim_file.refs, sim_file.cpu, npu.gate_min_pearson, npu.gate_max_mean_rel)
    return {**sim, "shape": str(sim_file.shape), "proxy": sim_file.proxy}


def target_entry(compiled: Compiled, out) -> dict:
    chip = QUALCOMM[compiled.soc]
    return {"compiled": True, "soc_id": chip.soc_id, "htp_arch": f"v{chip.htp_arch}" if chip.htp_arch else None,
            "product": chip.product, "file": out.as_posix(), "sha256": fileio.sha256_file(out),
            "bytes": compiled.bytes, "ops_on_npu": compiled.ops_on_npu, "ops_total": compiled.ops_total,
            "partitions": compiled.partitions, "seconds": round(compiled.seconds, 1),
            "peak_rss_mib": round(compiled.peak_rss_mib)}


def simulate(compiled, soc: str, refs: dict[str, tuple[np.ndarray, np.ndarray]], cpu: dict[str, np.ndarray],
             min_pearson: float, max_mean_rel: float) -> dict:
    """The compiled file on the HTP simulator as chip `soc`, on every photo of `refs`: gated against the official
    model, compared with the CPU file too."""
    started, photos, failures = time.time(), {}, []
    try:
        model = HtpSimulator(compiled, soc)
    except SimulatorError as exc:
        return {"photos": {}, "failures": [str(exc)], "passed": False, "seconds": time.time() - started}
    for photo, (image, official) in refs.items():
        t = time.time()
        try:
            depth = model(image)
        except SimulatorError as exc:
            failures.append(f"photo {photo!r}: {exc}")
            break
        finite = bool(np.isfinite(depth).all())
        photos[photo] = {**compare(depth, official), "finite": finite, "seconds": time.time() - t,
                         "vs_cpu": compare(depth, cpu[photo]) if finite else None}
        if not finite:
            failures.append(f"non-finite output (NaN or Inf) on photo {photo!r}")
    if not photos:
        return {"photos": {}, "failures": failures, "passed": False, "seconds": time.time() - started}
    gates, gate_failures = gate_fidelity(photos, min_pearson, max_mean_rel, GATE_KEYS)
    failures += gate_failures
    return {"photos": photos, "gates": gates, "pearson_min": gates["min_pearson"]["value"],
            "mean_rel_max": gates["max_mean_rel"]["value"], "seconds": time.time() - started,
            "passed": not failures, "failures": failures}
