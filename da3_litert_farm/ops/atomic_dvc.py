"""DVC with atomic file writes: `python -m da3_litert_farm.ops.atomic_dvc ARGS` is `dvc ARGS`, except that
dvc.lock, dvc.yaml, the other files DVC serializes and its rwlock are written to a temporary file and renamed over the
old one, as da3_litert_farm.core.fileio writes every file of the farm.

Why: DVC (3.67) rewrites dvc.lock in place after every stage (dvc/utils/serialize/_common.py `_dump_data`
opens it "w+", which empties it, then writes). A build killed in that moment (SIGKILL, a power cut, the
fault suite) leaves dvc.lock empty or cut short, and no rerun can read it: "'./dvc.lock' validation failed".
`make farm`, the parallel build and the catalog stage's lock pruning go through here; a bare `dvc repro`
keeps DVC's own writes (and its .gitignore rollback, below).
"""

from __future__ import annotations

import contextlib
import os
import sys

from da3_litert_farm.core import fileio

_installed = False


def install() -> None:
    """Make DVC's serializers write atomically in this process (idempotent)."""
    global _installed
    if _installed:
        return
    from dvc.utils.serialize import _common, _json, _py, _toml, _yaml

    in_place = _common._dump_data

    def dump_data(path, data, dumper, fs=None, **dumper_args):
        if fs is not None and getattr(fs, "protocol", None) != "local":
            return in_place(path, data, dumper, fs=fs, **dumper_args)
        with fileio.atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fd:
            dumper(data, fd, **dumper_args)
        return None

    # Each serializer imported the function by name; _modify_data looks it up in _common.
    for module in (_common, _json, _py, _toml, _yaml):
        module._dump_data = dump_data
    _atomic_rwlock()
    _keep_ignores_of_saved_outputs()
    _installed = True


def _atomic_rwlock() -> None:
    """DVC's .dvc/tmp/rwlock, which it rewrites in place as each stage takes and frees its locks: a build killed
    in that moment left it empty, and every later DVC command refused ("Unable to read RWLock-file"; found by
    the fault suite's kills, stop 36). Its writes go through a temporary file too."""
    from dvc import rwlock

    in_place = rwlock._edit_rwlock

    class AtomicWrites:
        def __init__(self, fs):
            self._fs = fs

        def __getattr__(self, name):
            return getattr(self._fs, name)

        def open(self, path, mode="r", **kwargs):
            return _written_atomically(path, kwargs.get("encoding")) if "w" in mode else \
                self._fs.open(path, mode, **kwargs)

    def edit_rwlock(lock_dir, fs, hardlink):
        local = getattr(fs, "protocol", None) == "local"
        return in_place(lock_dir, AtomicWrites(fs) if local else fs, hardlink)

    rwlock._edit_rwlock = edit_rwlock


def _keep_ignores_of_saved_outputs() -> None:
    """When any stage of a `dvc repro` fails, DVC (3.67, dvc/repo/scm_context.py) takes back every .gitignore
    entry the command added, the finished stages' too, though their outputs stay on disk and in dvc.lock. Git
    then lists gigabytes of built files as untracked, and `git add -A` commits them (found by the must-show
    farm's failed first repro, stop 37). DVC adds an entry only once an output is saved, so here an entry
    whose output exists is kept; the rest are rolled back as before."""
    from dvc.repo.scm_context import SCMContext

    rolling_back = SCMContext.__call__

    @contextlib.contextmanager
    def call(self, *args, **kwargs):
        with rolling_back(self, *args, **kwargs) as context:
            try:
                yield context
            except Exception:
                self.ignored_paths = [path for path in self.ignored_paths if not os.path.exists(path)]
                raise

    SCMContext.__call__ = call


@contextlib.contextmanager
def _written_atomically(path, encoding):
    with fileio.atomic_path(path) as tmp, open(tmp, "w", encoding=encoding) as fd:
        yield fd


def main(argv: list[str] | None = None) -> int:
    install()
    from dvc.cli import main as dvc_main

    return dvc_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
