"""Make sure LiteRT's GPU accelerator has an adapter here; install a software one if it lacks one.

    python -m da3_litert_farm.gpu.gpu_setup                  probe; on Debian/Ubuntu as root, install when missing
    python -m da3_litert_farm.gpu.gpu_setup --unless-skipped  the same, but nothing when params.yaml says
                                                 validation.gpu: skip (what `make farm` runs)
    python -m da3_litert_farm.gpu.gpu_setup --check          probe only

The probe compiles and runs a tiny graph on the accelerator (about 2 s). A machine with a
GPU (or macOS, where WebGPU uses Metal) needs nothing. A Linux machine without one gets Mesa's
lavapipe, a Vulkan driver on the CPU: Debian 12's own 22.3 is too old for Dawn ("No adapters
found"); 25.x from `bookworm-backports` works. Without root, this prints the exact commands.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from da3_litert_farm.core.system_packages import os_release, run_install

BACKPORTS = "deb http://deb.debian.org/debian bookworm-backports main"
BACKPORTS_LIST = "/etc/apt/sources.list.d/bookworm-backports.list"
PACKAGE = "mesa-vulkan-drivers"


def install_script(release: dict[str, str]) -> str | None:
    """One root shell line that gives this system a Vulkan driver Dawn accepts; None if unknown."""
    family = {release.get("ID", "")} | set(release.get("ID_LIKE", "").split())
    if not family & {"debian", "ubuntu"}:
        return None
    install = f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q {PACKAGE}"
    if release.get("ID") == "debian" and release.get("VERSION_CODENAME") == "bookworm":
        # Debian 12's own Mesa (22.3) is too old for Dawn; the backports suite has 25.x.
        add_suite = (f"(grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/ "
                     f"|| echo '{BACKPORTS}' > {BACKPORTS_LIST})")
        return f"{add_suite} && apt-get update -q && {install} -t bookworm-backports"
    return f"apt-get update -q && {install}"


def probe_in_subprocess() -> tuple[bool, str, str]:
    """Probe in a fresh process: a driver installed a moment ago is seen, and a crash stays there.
    (works, the adapter or the problem, the precision its arithmetic has: 'fp16', 'fp32' or '-')."""
    code = ("from da3_litert_farm.gpu.gpu_runtime import arithmetic_precision, probe\n"
            "adapter, problem = probe()\n"
            "print('ADAPTER', adapter if adapter else '-')\n"
            "print('PROBLEM', problem or '-')\n"
            "print('PRECISION', '-' if problem else arithmetic_precision())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    found = dict(line.split(" ", 1) for line in proc.stdout.splitlines()
                 if line.startswith(("ADAPTER ", "PROBLEM ", "PRECISION ")))
    if proc.returncode != 0 or "PRECISION" not in found:
        return False, f"the probe crashed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}", "-"
    if found["PROBLEM"] != "-":
        return False, found["PROBLEM"], "-"
    return True, found["ADAPTER"], found["PRECISION"]


def gpu_check_skipped() -> bool:
    from da3_litert_farm.config.params import load_params

    return load_params().validation.gpu == "skip"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="probe only, install nothing")
    parser.add_argument("--unless-skipped", action="store_true",
                        help="do nothing when params.yaml sets validation.gpu: skip")
    args = parser.parse_args(argv)
    if args.unless_skipped and gpu_check_skipped():
        print("gpu_setup: validation.gpu is 'skip' in params.yaml: no GPU adapter needed "
              "(the catalog will say the GPU check was skipped, and `make publish` refuses it)")
        return 0
    ok, detail, precision = probe_in_subprocess()
    if ok:
        return ready(detail, precision)
    print(f"gpu_setup: no working GPU adapter: {detail}", file=sys.stderr)
    script = install_script(os_release()) if sys.platform.startswith("linux") else None
    if script is None:
        print("gpu_setup: this system needs a GPU with a Vulkan (Linux) or Metal (macOS) driver for WebGPU; "
              "automatic set-up covers Debian and Ubuntu only. Or set validation.gpu: skip in params.yaml "
              "(a catalog without the GPU check cannot be published without --allow-unchecked-gpu).",
              file=sys.stderr)
        return 1
    if args.check or os.geteuid() != 0:
        print(f"gpu_setup: to install Mesa's software Vulkan driver (lavapipe), run:\n  sudo sh -c \"{script}\"\n"
              "then run this again.", file=sys.stderr)
        return 1
    if not run_install("gpu_setup", PACKAGE, script):
        return 1
    ok, detail, precision = probe_in_subprocess()
    if not ok:
        print(f"gpu_setup: installed {PACKAGE}, but the accelerator still has no adapter: {detail}",
              file=sys.stderr)
        return 1
    print(f"gpu_setup: installed {PACKAGE}")
    return ready(detail, precision)


def ready(adapter: str, precision: str) -> int:
    """An adapter that computes in FP32 only cannot check what phones run: say so, install nothing."""
    if precision != "fp16":
        print(f"gpu_setup: the GPU accelerator runs on {adapter}, which computes in FP32 only (no FP16 arithmetic: "
              "WebGPU's shader-f16, Vulkan's shaderFloat16), so the farm's GPU check would not describe FP16 on a "
              "phone. Use an adapter with FP16 (Mesa's lavapipe has it: leave VK_ICD_FILENAMES unset), or set "
              "validation.gpu: skip in params.yaml.", file=sys.stderr)
        return 1
    print(f"gpu_setup: LiteRT GPU accelerator ready on {adapter}, computing in FP16")
    return 0


if __name__ == "__main__":
    sys.exit(main())
