"""`dvc repro` in a child process of its own, through DVC's Python API (ops.dvc_adapter), so that a
stage or DVC itself dying fails one call with the end of its output, not the build.

    python -m da3_litert_farm.ops.dvc_repro [--single-item] [--pull] [TARGETS...]

The child prints DVC's output, then on its last line, as JSON, the stages it ran and those it
restored from the run-cache; `repro` starts it and reads that line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from da3_litert_farm.ops.dvc_command import dvc_env, run


def repro(*targets: str, cwd: Path | str, env: dict[str, str] | None = None, single_item: bool = False,
          pull: bool = False) -> dict:
    """{"ran": [...], "restored": [...], "log": DVC's output}; a failure raises BuildError."""
    flags = [*(["--single-item"] if single_item else []), *(["--pull"] if pull else [])]
    out = run([sys.executable, "-m", __spec__.name, *flags, *targets], cwd, env or dvc_env(),
              shown=" ".join(["dvc repro", *flags, *targets]))
    log, _, result = out.rstrip("\n").rpartition("\n")
    return {**json.loads(result), "log": log}


def main(argv: list[str] | None = None) -> int:
    from da3_litert_farm.ops import dvc_adapter  # DVC is loaded in the child only
    from da3_litert_farm.ops.atomic_dvc import install

    install()  # dvc.lock written atomically: a killed build leaves it readable

    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*")
    parser.add_argument("--single-item", action="store_true")
    parser.add_argument("--pull", action="store_true")
    args = parser.parse_args(argv)
    try:
        ran, restored = dvc_adapter.reproduce(args.targets, single_item=args.single_item, pull=args.pull)
    except dvc_adapter.DvcException as exc:  # as the dvc command says it: what failed, then why
        print(f"ERROR: {exc}" + (f": {exc.__cause__}" if exc.__cause__ else ""), file=sys.stderr)
        return 1
    print("\n" + json.dumps({"ran": ran, "restored": restored}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
