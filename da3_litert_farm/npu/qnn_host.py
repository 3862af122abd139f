"""Qualcomm's QAIRT host libraries, which LiteRT's Qualcomm compiler plugin and the HTP simulator load.

ai-edge-litert-sdk-qualcomm would download QAIRT from Qualcomm's site at install time, which a build machine
without that site cannot; onnxruntime-qnn (PyPI, Microsoft) ships the same x86-64 host libraries (libQnnHtp.so:
the HTP compiler and simulator). Its 2.6.0 carries QAIRT 2.50, the version LiteRT 2.3.0 was built and released
against (ai-edge-litert-sdk-qualcomm 2.3.0 pins QAIRT 2.50.0, and names the same version for LiteRT's phone
runtime libraries): docs/npu.md says how we know. Its licence is Qualcomm's AI Stack License (use to develop
applications, no standalone redistribution): the farm installs it, never vendors it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from da3_litert_farm.core import fileio
from da3_litert_farm.core.errors import FarmError

PACKAGE = "onnxruntime_qnn"
PIP_NAME = "onnxruntime-qnn"
QAIRT_SERIES = "2.50"  # what LiteRT 2.3.0's Qualcomm plugin and NPU runtime were released against
LICENSE_NOTE = ("Qualcomm AI Stack License (Qualcomm_LICENSE.pdf in the onnxruntime-qnn wheel): use to develop "
                "your applications, no standalone redistribution")
# The plugin links libQnnLpai.so, which the wheel lacks and DA3's graph never calls: an empty library
# satisfies the loader.
LPAI = "libQnnLpai.so"
STUB_DIR = Path(sys.prefix) / "lib" / "da3-litert-farm-qnn"


class NpuSetupError(FarmError, RuntimeError):
    """The QAIRT host libraries are missing or unusable; the message says what to install."""


def host_dir() -> Path:
    """The folder of the QAIRT host libraries (onnxruntime-qnn's package folder)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise NpuSetupError(f"the NPU stage needs Qualcomm's QAIRT host libraries: `make farm` installs "
                            f"{PIP_NAME} (pinned in pyproject.toml's npu extra; {LICENSE_NOTE}), or set npu.targets: "
                            f"[] in params.yaml to build no NPU files")
    return Path(spec.origin).parent


def qairt_version(folder: Path | None = None) -> str:
    """The QAIRT version of the host libraries, as onnxruntime-qnn's build record states it (e.g. 2.50.40)."""
    record = (folder or host_dir()) / "build_and_package_info.py"
    found = re.search(r"^qnn_version = '([0-9.]+)'", record.read_text(), re.M) if record.is_file() else None
    if found is None:
        raise NpuSetupError(f"{record} does not state its QAIRT version (qnn_version)")
    return found[1]


def lpai_stub() -> Path:
    """The folder holding an empty libQnnLpai.so, built once with the C compiler."""
    target = STUB_DIR / LPAI
    if target.is_file():
        return STUB_DIR
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        raise NpuSetupError(f"building an empty {LPAI} (the Qualcomm plugin links it) needs a C compiler: "
                            f"apt-get install gcc")
    source = "void da3_litert_farm_lpai_placeholder(void) {}\n"
    with fileio.atomic_path(target) as tmp:
        subprocess.run([compiler, "-shared", "-fPIC", "-x", "c", "-", "-o", str(tmp)], input=source.encode(),
                       check=True, capture_output=True)
    return STUB_DIR


_environment = threading.Lock()
_holders: list[str | None] = []  # LD_LIBRARY_PATH as it was before the first of the compiles running now


@contextlib.contextmanager
def host_libraries() -> Iterator[Path]:
    """LD_LIBRARY_PATH holds the QAIRT host libraries (and the stub) while LiteRT's compiler runs: it starts
    apply_plugin_main, which loads the plugin, which loads libQnnHtp.so by name. Yields the libraries' folder.
    Compiles may run in threads at once: the first one in sets the variable, the last one out restores it."""
    with _environment:
        folder, stub = host_dir(), lpai_stub()
        if not _holders:
            before = os.environ.get("LD_LIBRARY_PATH")
            os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(folder), str(stub), before) if p)
            _holders.append(before)
        else:
            _holders.append(_holders[0])
    try:
        yield folder
    finally:
        with _environment:
            before = _holders.pop()
            if not _holders:
                if before is None:
                    os.environ.pop("LD_LIBRARY_PATH", None)
                else:
                    os.environ["LD_LIBRARY_PATH"] = before
