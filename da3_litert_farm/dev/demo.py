"""`make demo`: the whole loop in minutes, offline: build a small farm, sign, publish, pull for a phone, report.

    python -m da3_litert_farm.dev.demo [--dir .demo] [--tier 224] [--aspects 9x16,3x4,4x3,16x9]

Everything lives under DIR (default .demo/, which git ignores; `make clean-demo` removes it): a copy of this
repository as a farm whose params build the given aspects at a low tier from stress weights (a seeded random init:
noise, not depth, and every catalog, tag and sidecar says STRESS WEIGHTS), each file also compiled for one Qualcomm
NPU; a throwaway publisher key; the farm's local DVC remote; and an app's assets folder that the light client pulls
into, once for the GPU and once for the phone's NPU. Each step says what it does and how long it took.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
VERSION = "0.1.0"
CAMERA = "3024x4032"  # a portrait app on a phone's 4:3 main sensor
SOC = "SM8650"  # Snapdragon 8 Gen 3
# The lines of a build worth showing: DVC's stage names and each stage's one-line result.
_SHOWN = re.compile(r"^(Running stage '[^']+'|Stage '[^']+' is cached|(patch|export|quantize|validate|npu|gpu|bundle|"
                    r"catalog|report) \S+: (?!compiling|running|.*running on)).*")


class Step:
    """Prints what a step does, then how long it took."""

    def __init__(self, number: int, what: str):
        self.number, self.what = number, what

    def __enter__(self):
        print(f"\n[{self.number}] {self.what}", flush=True)
        self.started = time.time()
        return self

    def __exit__(self, kind, *_):
        if kind is None:
            print(f"    done in {time.time() - self.started:.0f} s", flush=True)
        return False


def run(cmd: list, cwd: Path, env: dict, shown: re.Pattern | None = None, log: Path | None = None) -> str:
    """Run a command; print the lines `shown` matches (all when None); keep the whole output in `log`."""
    proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if shown is None or shown.match(line):
            print(f"    {line.rstrip()}", flush=True)
    proc.wait()
    output = "".join(lines)
    if log is not None:
        log.write_text(output)
    if proc.returncode != 0:
        tail = "".join(lines[-20:])
        raise SystemExit(f"demo: {' '.join(map(str, cmd[:4]))} failed (exit {proc.returncode})"
                         + (f"; the whole log is {log}" if log else "") + f":\n{tail}")
    return output


def farm_params(doc: dict, tier: int, aspects: list[str]) -> dict:
    """The shipped params at a low tier, stress weights, one GPU mode and one NPU chip: minutes, not hours."""
    doc["models"] = {"small": {"source": "random", "preset": "da3-small", "seed": 0}}
    doc["tiers"] = [tier]
    doc["aspects"] = {name: doc["aspects"][name] for name in aspects}
    doc["validation"]["gpu_modes"], doc["validation"]["gpu_mode_gates"] = ["fp16"], {}
    doc["npu"]["targets"], doc["npu"]["simulate"] = [SOC], [SOC]
    doc["catalog"]["version"] = VERSION
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=REPO / ".demo", help="where everything goes (default: .demo)")
    parser.add_argument("--tier", type=int, default=224, help="the long side of every file (default: %(default)s)")
    parser.add_argument("--aspects", default="9x16,3x4,4x3,16x9", help="aspects of params.yaml to build")
    args = parser.parse_args(argv)
    root = args.dir.resolve()
    if root.exists():
        raise SystemExit(f"demo: {root} exists: `make clean-demo` removes it first")
    started = time.time()
    farm, keys, app = root / "farm", root / "keys", root / "app" / "src" / "main" / "assets" / "depth"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1", "FARM_SIGNING_KEY": str(keys / "publisher.pem")}
    git = lambda *a: run(["git", *a], farm, env, shown=re.compile("^$"))
    py = lambda *a, **kw: run([sys.executable, *a], farm, env, **kw)

    with Step(1, f"a farm at {farm}: this repository's files, params for stress weights (not shippable) at tier "
                 f"{args.tier} over {args.aspects}, each file also compiled for Qualcomm {SOC}"):
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                               capture_output=True, text=True).stdout.split()
        for name in (f for f in files if not f.startswith(("artifacts/", "tests/")) and (REPO / f).is_file()):
            (farm / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, farm / name)
        doc = farm_params(yaml.safe_load((REPO / "params.yaml").read_text()), args.tier, args.aspects.split(","))
        (farm / "params.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        git("init", "-q")
        git("config", "user.email", "demo@localhost")
        git("config", "user.name", "demo")
        git("add", "-A")
        git("commit", "-qm", "demo farm")
    with Step(2, "build: dvc repro (convert, check on the CPU, the NPU simulator and the GPU, bundle, catalog, "
                 f"report); the whole log: {root / 'build.log'}"):
        py("-m", "dvc", "repro", shown=_SHOWN, log=root / "build.log")
    with Step(3, f"a throwaway publisher key in {keys} (a real one stays outside any repository: make keys)"):
        py("-m", "da3_litert_farm.ops.signing", "keys")
    with Step(4, f"publish catalog {VERSION}: commit it, push its files to the local remote, sign and tag"):
        git("add", "params.yaml", "dvc.lock", "artifacts")
        git("commit", "-qm", f"Catalog {VERSION}")
        py("-m", "da3_litert_farm.ops.publish", "--allow-stress")
    farm_cli = Path(sys.executable).parent / "farm"
    pull = [farm_cli, "pull", "--repo", farm, "--version", VERSION, "--camera", CAMERA, "--trust",
            keys / "publisher.pub", "--allow-stress", "--out", app]
    with Step(5, f"an app build pulls the file for a {CAMERA} portrait camera, signature verified, into {app}"):
        run(pull, root, env)
    with Step(6, f"... and the one compiled for a Snapdragon 8 Gen 3's NPU (--soc {SOC})"):
        run([*pull, "--soc", SOC], root, env)
    with Step(7, "later, offline: the app's files and sidecars checked against the signed release"):
        run([farm_cli, "verify", app, "--trust", keys / "publisher.pub"], root, env)
    print(f"\nDone in {time.time() - started:.0f} s. The report: {farm / 'artifacts/report/index.html'}\n"
          f"The app's assets: {app}. Every file here computes noise (stress weights). "
          f"`make clean-demo` removes {root}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
