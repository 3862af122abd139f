"""Benchmark what installing the farm's repository costs an app build machine: the light client
(`pip install <repo>`, and with the plugin of an S3 or SSH remote: `<repo>[s3]`, `<repo>[ssh]`; with the
signature check: `<repo>[verify]`, `<repo>[s3,verify]`) against the full farm (`pip install <repo>[farm]`, which is what the plain install used to bring).

    python -m da3_litert_farm.dev.bench_install [--python python3.9] [--only VARIANT] [--record NAME]

Each install goes into a fresh venv from a copy of the repository's files (what pip builds
from a git URL), with pip's download cache as it is on this machine. Prints the wall time,
the venv's size on disk and its number of distributions; --record NAME also writes them to
docs/figures/NAME.json (see da3_litert_farm.dev.figures).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from da3_litert_farm.core.git import git
from da3_litert_farm.dev import figures

REPO = Path(__file__).resolve().parents[2]
# The client alone, with each remote's plugin (what an app build installs), with the verify extra that checks
# signatures (model-signing), and the whole farm.
VARIANTS = {"client": "", "client[s3]": "[s3]", "client[ssh]": "[ssh]", "client[verify]": "[verify]",
            "client[s3,verify]": "[s3,verify]", "farm": "[farm]"}


def repo_copy(dst: Path) -> Path:
    files = git("ls-files", "-co", "--exclude-standard", cwd=REPO).split("\n")
    for f in files:
        if f and (REPO / f).is_file() and not f.startswith(("artifacts/", "tests/")):
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, dst / f)
    return dst


def du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def measure(python: str, variant: str, work: Path) -> dict:
    venv = work / f"venv-{variant.replace('[', '-').rstrip(']')}"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    started = time.perf_counter()
    subprocess.run([*pip, f"{work / 'src'}{VARIANTS[variant]}"], check=True)
    seconds = time.perf_counter() - started
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"], check=True,
                            capture_output=True, text=True).stdout.split()
    version = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(*sys.version_info[:3], sep='.')"],
                             check=True, capture_output=True, text=True).stdout.strip()
    return {"variant": variant, "python": version, "seconds": seconds, "mb": du_mb(venv), "dists": len(listed)}


def figure_rows(results: list[dict]) -> list[dict]:
    """What main prints, one row per variant."""
    return [{"variant": r["variant"], "python": r["python"], "install s": r["seconds"], "venv MB": r["mb"],
             "distributions": r["dists"]} for r in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter for the venvs (default: this one)")
    parser.add_argument("--only", choices=sorted(VARIANTS), help="measure one variant only")
    parser.add_argument("--record", metavar="NAME", help="also write the figures to docs/figures/NAME.json")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-install.") as tmp:
        work = Path(tmp)
        repo_copy(work / "src")
        for variant in [args.only] if args.only else list(VARIANTS):
            r = measure(args.python, variant, work)
            results.append(r)
            print(f"{r['variant']:<17} python {r['python']:<8} install {r['seconds']:6.1f} s   venv {r['mb']:7.0f} MB   "
                  f"{r['dists']} distributions", flush=True)
    if args.record:
        path = figures.record(args.record, figure_rows(results),
                              figures.command_line("da3_litert_farm.dev.bench_install", argv))
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
