"""The base of every error the farm raises on purpose (standard library only).

A FarmError is an error the farm explains in one line: a bad params.yaml, a missing input, a failed
conversion. The stage skeleton (da3_litert_farm.config.stage) prints it as `stage: message` and exits 1;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class FarmError(Exception):
    """An error the farm explains in one line."""


def first_line(exc: BaseException) -> str:
    """`module.Type: first line of the message`, for wrapping a library's error (its full text can run to
    pages); the module says whose error it is, as `struct.error` does where `error` alone would not."""
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{name}: {lines[0]}" if lines else name
