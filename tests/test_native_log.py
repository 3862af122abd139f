"""Native libraries' stderr goes to the stage's log file, not the terminal (da3_litert_farm.config.native_log): each
case runs in a child process whose stderr is a pipe, as a terminal would be, and writes to fd 2 as C code does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.farm_repo import REPO

# As LiteRT's C++ logging writes, to stderr and to stdout.
NATIVE = ('os.write(2, b"INFO: [accelerator_registry.cc:12] native line\\n"); '
          'os.write(1, b"INFO: Failed to load OpenCL library\\n")')
STAGE = """
import atexit, os, sys
from da3_litert_farm.config import stage
from da3_litert_farm.core.errors import FarmError

# As LiteRT's accelerators log their destruction: after Python's exit (this handler runs after the stage's own).
atexit.register(os.write, 2, b"INFO: [accelerator_registry.cc:43] DestroyAccelerator\\n")

def body(run):
    NATIVE
    print("python's own stderr", file=sys.stderr)
    print(run.label + ": summary")
    END

sys.exit(stage.run("gpu", "doc", body, params=False))  # argv from the command line: the process is the stage
"""
ENDS = {"pass": "return None", "gate": "return run.failed(['pearson 0.9 < 0.999'])",
        "error": "raise FarmError('LiteRT could not compile the file')"}


def _stage(tmp_path, how, native=NATIVE, **env) -> subprocess.CompletedProcess:
    """The stage `gpu`, no params, whose body writes a `native` line and Python's lines, then ends `how` (ENDS)."""
    code = STAGE.replace("NATIVE", native).replace("END", ENDS[how])
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


def test_native_output_goes_to_the_log_and_python_output_to_the_terminal(tmp_path):
    proc = _stage(tmp_path, "pass")
    assert proc.returncode == 0, proc.stderr
    assert "INFO" not in proc.stdout + proc.stderr
    assert proc.stderr == "python's own stderr\n" and proc.stdout == "gpu: summary\n"
    assert (tmp_path / ".farm-logs" / "gpu.log").read_text().splitlines() == [
        "INFO: [accelerator_registry.cc:12] native line", "INFO: Failed to load OpenCL library",
        "INFO: [accelerator_registry.cc:43] DestroyAccelerator"]


def test_farm_native_log_1_keeps_native_output_on_the_terminal(tmp_path):
    proc = _stage(tmp_path, "pass", FARM_NATIVE_LOG="1")
    assert proc.returncode == 0, proc.stderr
    assert "native line" in proc.stderr and "python's own stderr" in proc.stderr and "DestroyAccelerator" in proc.stderr
    assert "Failed to load OpenCL" in proc.stdout
    assert not (tmp_path / ".farm-logs").exists()


def test_a_failed_gate_shows_its_reason_and_the_log_path_on_the_terminal(tmp_path):
    proc = _stage(tmp_path, "gate")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == ["python's own stderr", "gpu: FAILED pearson 0.9 < 0.999",
                                        "gpu: native log: .farm-logs/gpu.log"]


def test_a_farm_error_is_one_line_with_its_reason_and_the_log_path(tmp_path):
    proc = _stage(tmp_path, "error")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == ("gpu: LiteRT could not compile the file "
                                            "(native log: .farm-logs/gpu.log)")
    assert "native line" in (tmp_path / ".farm-logs" / "gpu.log").read_text()


def test_a_crash_leaves_what_native_code_wrote_before_it(tmp_path):
    """A native crash ends the process without any Python cleanup: the log holds what came before."""
    code = textwrap.dedent("""
        import os
        from pathlib import Path
        from da3_litert_farm.config import native_log
        with native_log.to_file(Path("crash.log")):
            os.write(2, b"Selected adapter: llvmpipe\\n")
            os._exit(139)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 139 and proc.stderr == ""
    assert (tmp_path / "crash.log").read_text() == "Selected adapter: llvmpipe\n"


def test_an_empty_log_is_removed_and_no_failure_names_it(tmp_path):
    proc = _stage(tmp_path, "gate", native="pass")
    assert proc.stderr.splitlines() == ["python's own stderr", "gpu: FAILED pearson 0.9 < 0.999",
                                        "INFO: [accelerator_registry.cc:43] DestroyAccelerator"]
    assert not (tmp_path / ".farm-logs").exists()  # nor its folder, where it was the only log


def test_the_gpu_runtimes_adapter_capture_passes_native_output_on_to_the_log(tmp_path):
    """GpuModel reads Dawn's adapter line from fd 2, then writes it back there: to the log, not the terminal."""
    code = textwrap.dedent("""
        import os
        from pathlib import Path
        from da3_litert_farm.config import native_log
        from da3_litert_farm.gpu.gpu_runtime import captured_native_stderr
        with native_log.to_file(Path("gpu.log")):
            with captured_native_stderr() as log:
                os.write(2, b"Selected adapter: llvmpipe\\n")
            print("read:", log[0].strip())
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == "read: Selected adapter: llvmpipe\n"
    assert (tmp_path / "gpu.log").read_text() == "Selected adapter: llvmpipe\n"
