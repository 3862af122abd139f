"""`make demo` at the tests' tiny shape: the whole loop, from a copy of this repository to an app's pulled, verified
files, offline, writing only under its folder."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from da3_litert_farm.core.fileio import sha256_file

REPO = Path(__file__).resolve().parents[1]


def test_the_demo_builds_signs_publishes_and_pulls_for_a_phone(tmp_path):
    root = tmp_path / "demo"
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.dev.demo", "--dir", str(root), "--tier", "112",
                           "--aspects", "9x16"], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert [int(n) for n in re.findall(r"^\[(\d)\] ", out, re.M)] == [1, 2, 3, 4, 5, 6, 7]
    assert len(re.findall(r"^    done in \d+ s$", out, re.M)) == 7
    for stage in ("patch", "export", "quantize", "validate", "npu", "gpu"):
        assert f"Running stage '{stage}@small-112-9x16'" in out, stage
    assert "INFO: [" not in out  # LiteRT's native logging stays in build.log
    assert "published da3-small-litert 0.1.0 as catalog/v0.1.0: 1 file, 1 NPU file and 1 bundle (STRESS WEIGHTS" in out
    catalog = json.loads((root / "farm/artifacts/catalog.json").read_text())
    (cell,) = catalog["models"]
    assets = root / "app/src/main/assets/depth"
    gpu = assets / "da3-small-litert-small-112-9x16-112x70-fp16.tflite"
    npu = assets / "da3-small-litert-small-112-9x16-112x70-qualcomm-sm8650.tflite"
    assert sha256_file(gpu) == cell["sha256"] and sha256_file(npu) == cell["npu"]["targets"]["SM8650"]["sha256"]
    for model in (gpu, npu):
        side = json.loads(model.with_name(f"{model.name}.json").read_text())
        assert side["signature"]["verified"] and side["stress_weights"], side["signature"]
    assert f"verified 2 files and their sidecars in {assets} against catalog 0.1.0" in out
    assert (root / "farm/artifacts/report/index.html").is_file() and str(root / "farm/artifacts/report") in out
    after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    assert after == before  # nothing written into this checkout
    again = subprocess.run([sys.executable, "-m", "da3_litert_farm.dev.demo", "--dir", str(root)],
                           capture_output=True, text=True)
    assert again.returncode != 0 and f"demo: {root} exists: `make clean-demo` removes it first" in again.stderr
