"""Publish under faults (issue 30, items 1 and 2), with real processes on one machine.

Two publishes at once, from two clones of one farm that share `origin` (a bare repository) and the DVC
remote (a folder): of one version, exactly one wins and the other is refused with what to do; of two
versions, both are published. A publish killed with SIGKILL (its whole process group: `dvc push`,
`git push` and origin's receiving end die with it) at chosen points and at random ones: after every
kill a client of origin, and the publisher's own repository, see the version fully published or
absent, never in part, and a rerun of `make publish` finishes it.

Each trial goes into the fault log (docs/reliability.md); a broken invariant fails the test too.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.farm_repo import Farm
from tests.fault_farm import (PUBLISH, copy_farm, killed_at_random, md5_file, publish, rng, shipped_objects, tags,
                              trials)



# --- the farms ---------------------------------------------------------------------------------------------------


def _clone(template: Farm, dest: Path, origin: Path, who: str, remote: Path | None = None) -> Farm:
    """A copy of the built farm whose tags go to `origin` and whose files go to `remote` (default: its own
    folder), committing as `who`."""
    farm = copy_farm(template, dest)
    farm.git("config", "user.name", who)
    farm.git("remote", "add", "origin", str(origin))
    if remote:
        (farm.root / ".dvc" / "config.local").write_text(f"['remote \"storage\"']\n    url = {remote}\n")
    return farm


def _reset_hard(farm: Farm, commit: str) -> None:
    proc = subprocess.run(["git", "reset", "-q", "--hard", commit], cwd=farm.root, capture_output=True, text=True)
    assert proc.returncode == 0, f"git reset --hard {commit} in {farm.root}: {proc.stdout}{proc.stderr}"


def _bare(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def _version(farm: Farm, version: str) -> None:
    """params.yaml's catalog.version set to `version`, rebuilt (params, catalog, report) and committed."""
    doc = farm.params
    doc["catalog"]["version"] = version
    farm.set_params(doc)
    assert farm.repro()[0] == {"params", "catalog", "report"}
    farm.git("commit", "-qam", f"catalog {version}")


def _tag_names(farm: Farm, version: str) -> set[str]:
    """Every tag a published `version` has: its catalog's, and one per shipped file and bundle."""
    catalog = farm.catalog()
    keys = [m["cell"] for m in catalog["models"]] + [f"{b['bundle']}-bundle" for b in catalog["bundles"]]
    return {f"catalog/v{version}"} | {f"{catalog['name']}-{k}@v{version}" for k in keys}


def _forget(version: str, *repos: Path) -> None:
    """Delete `version`'s tags from each repository (a farm or origin), for a fresh trial."""
    for repo in repos:
        names = [ref.removeprefix("refs/tags/") for ref in tags(repo)
                 if ref.endswith(f"@v{version}") or ref == f"refs/tags/catalog/v{version}"]
        if names:
            subprocess.run(["git", "tag", "-d", *names], cwd=repo, check=True, capture_output=True)


# --- what a client sees -------------------------------------------------------------------------------------------


def _peeled(repo: Path) -> dict[str, str]:
    """tag name -> the commit it points at, as a client of `repo` sees them (git ls-remote)."""
    out = subprocess.run(["git", "ls-remote", "--tags", str(repo)], capture_output=True, text=True,
                         check=True).stdout
    refs = dict(reversed(line.split("\t")) for line in out.splitlines())
    return {ref.removeprefix("refs/tags/"): refs.get(f"{ref}^{{}}", oid) for ref, oid in refs.items()
            if not ref.endswith("^{}")}


def _show(repo: Path, rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


_HASHED: dict[tuple, str] = {}


def _md5(path: Path) -> str:
    """md5_file, remembered while the file is unchanged (same inode, size, mtime and ctime: a rewrite, DVC's
    temporary file renamed into place, changes the inode and ctime), since every trial checks each object often."""
    st = path.stat()
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _HASHED:
        _HASHED[key] = md5_file(path)
    return _HASHED[key]


def _object(remote: Path, md5: str) -> Path:
    return remote / "files" / "md5" / md5[:2] / md5[2:]


def _shipped_objects(repo: Path, commit: str, remote: Path) -> dict[str, str] | str:
    """Each object a client of `commit` fetches -> its md5 (fault_farm.shipped_objects over the remote folder; the
    bundle's through its folder's manifest there); or what is missing."""
    objects = shipped_objects(repo, commit, lambda oid: _object(remote, oid).read_bytes()
                              if _object(remote, oid).is_file() else None)
    broken = [what for what, oid in objects.items() if oid is None]
    return f"{broken[0]}: its folder's manifest is missing or corrupt on the remote" if broken else objects


def _torn_objects(remote: Path) -> list[str]:
    """Objects on the remote under their final name (files/md5/xx/<rest of the md5>) with other bytes: what a
    push killed mid-write would leave if it did not write to a temporary name first."""
    folder = remote / "files" / "md5"
    found = [p for p in folder.glob("??/*") if len(p.parent.name + p.name.removesuffix(".dir")) == 32]
    return [str(p) for p in found if _md5(p) != p.parent.name + p.name.removesuffix(".dir")]


def _state(repo: Path, names: set[str], remote: Path) -> str:
    """'absent' or 'published' (every tag of the version, at one commit, whose shipped files the remote holds
    with their bytes), as a client of `repo` sees it; anything else says what is partial or missing."""
    held = {n: c for n, c in _peeled(repo).items() if n in names}
    if not held:
        return "absent"
    if set(held) != names:
        return f"partial: tags {sorted(names - set(held))} missing"
    if len(set(held.values())) > 1:
        return f"partial: tags at different commits {held}"
    md5s = _shipped_objects(repo, next(iter(held.values())), remote)
    if isinstance(md5s, str):
        return f"tagged, but {md5s}"
    for path, md5 in md5s.items():
        obj = _object(remote, md5)
        if not obj.is_file():
            return f"tagged, but {path} missing from the remote"
        if _md5(obj) != md5.removesuffix(".dir"):
            return f"tagged, but {path} corrupt on the remote ({obj})"
    return "published"


# --- two publishes at once ----------------------------------------------------------------------------------------


def _at_once(*farms: Farm) -> list[subprocess.CompletedProcess]:
    """`make publish` started in every farm at the same moment; each one's exit code and output."""
    procs = [subprocess.Popen([sys.executable, *PUBLISH], cwd=f.root, env=f.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for f in farms]
    outputs = [p.communicate(timeout=300) for p in procs]
    return [subprocess.CompletedProcess(p.args, p.returncode, *out) for p, out in zip(procs, outputs)]


@dataclass
class Clones:
    """Two publishers (a, b) of one farm sharing origin and the DVC remote (a's folder); `base`: each one's commit
    before any publish, which every trial resets it to."""
    a: Farm
    b: Farm
    origin: Path
    remote: Path
    base: dict

    def reset(self, *versions: str) -> None:
        for version in versions:
            _forget(version, self.a.root, self.b.root, self.origin)
        shutil.rmtree(self.remote, ignore_errors=True)
        for farm in (self.a, self.b):
            _reset_hard(farm, self.base[farm.root])


@pytest.fixture(scope="module")
def clones(module_dir, fault_template) -> Clones:
    root = module_dir("publish-faults")
    origin = _bare(root / "origin.git")
    a = _clone(fault_template, root / "a", origin, "publisher-a")
    b = _clone(fault_template, root / "b", origin, "publisher-b", root / "a" / "da3-farm-remote")
    return Clones(a, b, origin, root / "a" / "da3-farm-remote",
                  {f.root: f.git("rev-parse", "HEAD").strip() for f in (a, b)})


def test_two_publishes_of_one_version_at_once(clones, fault_log):
    a, b, origin, remote = clones.a, clones.b, clones.origin, clones.remote
    names = _tag_names(a, "0.1.0")
    for _ in range(trials()):
        clones.reset("0.1.0")
        results = _at_once(a, b)

        problems = []
        won = [f for f, r in zip((a, b), results) if r.returncode == 0]
        if len(won) != 1:
            problems.append(f"{len(won)} publishes succeeded: {[r.stdout + r.stderr for r in results]}")
        else:
            winner, loser = won[0], b if won[0] is a else a
            refusal = results[(a, b).index(loser)].stderr
            head = winner.git("rev-parse", "HEAD").strip()
            if _state(origin, names, remote) != "published" or set(_peeled(origin).values()) != {head}:
                problems.append(f"origin: {_state(origin, names, remote)}, tags {_peeled(origin)} (winner {head})")
            for rerun in (False, True):
                if rerun:
                    again = publish(loser)
                    refusal = again.stderr if again.returncode else "published"
                if not ("another publish won" in refusal and head[:12] in refusal and "git fetch" in refusal
                        and "bump catalog.version" in refusal and refusal.count("\n") == 1):
                    problems.append(f"{'rerun ' if rerun else ''}refusal: {refusal}")
                if _peeled(loser.root).keys() & names:  # origin refused them: none left to disagree with it
                    problems.append(f"the loser kept tags origin refused: {sorted(_peeled(loser.root).keys() & names)}")
            if _state(winner.root, names, remote) != "published" or _peeled(winner.root) != _peeled(origin):
                problems.append(f"the winner's tags {_peeled(winner.root)} are not origin's {_peeled(origin)}")
        fault_log.add("two publishes of one version at once",
                      "one published, the other refused: another publish won" if not problems else "; ".join(problems),
                      consistent=not problems)
        assert not problems, problems


def test_two_publishes_of_two_versions_at_once(clones, fault_log):
    a, b, origin, remote = clones.a, clones.b, clones.origin, clones.remote
    clones.reset("0.1.0")
    _version(b, "0.2.0")
    clones.base[b.root] = b.git("rev-parse", "HEAD").strip()
    versions = {a: "0.1.0", b: "0.2.0"}
    for _ in range(trials()):
        clones.reset(*versions.values())
        results = _at_once(a, b)

        problems = [f"{versions[f]}: {r.stdout + r.stderr}" for f, r in zip((a, b), results) if r.returncode]
        for farm, version in versions.items():
            names = _tag_names(farm, version)
            if _state(origin, names, remote) != "published":
                problems.append(f"{version} on origin: {_state(origin, names, remote)}")
            if {_peeled(origin)[n] for n in names & _peeled(origin).keys()} - {farm.git("rev-parse", "HEAD").strip()}:
                problems.append(f"{version}'s tags on origin are not at its publisher's commit")
        fault_log.add("two publishes of two versions at once",
                      "both published" if not problems else "; ".join(problems), consistent=not problems)
        assert not problems, problems


# --- a publish killed ---------------------------------------------------------------------------------------------


class Killed:
    """One farm publishing catalog 0.1.0 to origin and its remote folder, reset to before the publish per trial."""

    def __init__(self, clones: Clones):
        self.farm, self.origin, self.remote = clones.a, clones.origin, clones.remote
        clones.reset("0.1.0")
        self.base = clones.base[self.farm.root]
        self.names = _tag_names(self.farm, "0.1.0")
        self.hook = self.origin / "hooks" / "pre-receive"
        started = time.monotonic()
        out = publish(self.farm)
        self.duration = time.monotonic() - started  # an uninterrupted publish, the random kills' range
        assert out.returncode == 0 and self.published(), out.stdout + out.stderr
        self.declared = (self.farm.root / "dvc.yaml").read_text()  # with the artifacts section publish commits
        shipped = _shipped_objects(self.farm.root, self.base, self.remote)
        self.objects = [_object(self.remote, md5) for md5 in shipped.values()]
        self.reset()

    def published(self) -> bool:
        return (_state(self.origin, self.names, self.remote) == "published"
                and _state(self.farm.root, self.names, self.remote) == "published")

    def reset(self) -> None:
        """Before the publish again: no tags of 0.1.0 here or on origin, an empty remote, HEAD at the base."""
        _forget("0.1.0", self.farm.root, self.origin)
        shutil.rmtree(self.remote, ignore_errors=True)
        self.hook.unlink(missing_ok=True)
        for lock in self.locks():
            (self.farm.root / lock).unlink()
        _reset_hard(self.farm, self.base)

    def locks(self) -> list[Path]:
        """git's lock files left in the publisher's repository (by a git command killed mid-way)."""
        return sorted(p.relative_to(self.farm.root) for p in (self.farm.root / ".git").rglob("*.lock"))

    def head(self) -> str:
        return (self.farm.root / ".git" / "refs" / "heads" / "master").read_text().strip()

    def remote_files(self) -> list[Path]:
        return [Path(d, f) for d, _, files in os.walk(self.remote) for f in files]

    def kill_when(self, reached, timeout_s: float = 120) -> bool:
        """Start a publish and SIGKILL its process group once `reached()`; False if it ended first."""
        proc = subprocess.Popen([sys.executable, *PUBLISH], cwd=self.farm.root, env=self.farm.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None and time.monotonic() < deadline:
            if reached():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return True
            time.sleep(0.002)
        proc.kill()
        proc.wait()
        return False

    def check(self, fault: str, fault_log, killed: bool = True) -> None:
        """The invariants after a kill, then a rerun that must finish the publish; one row of the fault log."""
        seen = {where: _state(repo, self.names, self.remote)
                for where, repo in (("origin", self.origin), ("publisher", self.farm.root))}
        problems = [f"{where}: {state}" for where, state in seen.items() if state not in ("absent", "published")]
        if seen["origin"] == "published" and seen["publisher"] != "published":
            problems.append("origin holds tags the publisher lacks")
        problems += [f"torn object on the remote: {p}" for p in _torn_objects(self.remote)]
        self.hook.unlink(missing_ok=True)
        rerun = publish(self.farm)
        note = ""
        named = [lock for lock in self.locks() if rerun.returncode and str(lock) in rerun.stderr]
        if named:  # a git command killed mid-way left its lock: the refusal names it, the user deletes it
            note = f", stale {' '.join(map(str, named))} named and removed"
            for lock in named:
                (self.farm.root / lock).unlink()
            rerun = publish(self.farm)
        if self.locks():  # not in publish's way; git names it to whoever runs the next commit
            note += f", stale {' '.join(map(str, self.locks()))} left"
        if rerun.returncode or not self.published():
            problems.append(f"the rerun did not finish the publish: {rerun.stdout + rerun.stderr}".strip())
        elif "\nartifacts:\n" not in _show(self.origin, "catalog/v0.1.0", "dvc.yaml"):
            problems.append("the tagged commit does not declare the artifacts (dvc.yaml)")
        if self.farm.git("status", "--porcelain").strip():
            problems.append(f"the rerun left a dirty tree: {self.farm.git('status', '--porcelain')}")
        where = {("absent", "absent"): "absent", ("absent", "published"): "absent (tagged here only)",
                 ("published", "published"): "published"}.get((seen["origin"], seen["publisher"]), "")
        outcome = ((f"{where}, rerun published" if killed else "ended before the kill, published") + note
                   if not problems else "; ".join(problems))
        fault_log.add(fault, outcome, consistent=not problems)
        self.reset()
        assert not problems, problems


@pytest.fixture(scope="module")
def killed(clones) -> Killed:
    """Publisher a of `clones`, alone."""
    return Killed(clones)


def test_publish_killed_once_the_artifacts_commit_is_made(killed, fault_log):
    """Before the push: HEAD has moved to the artifacts commit; the rerun starts from there (the tree is clean)."""
    assert killed.kill_when(lambda: killed.head() != killed.base)
    killed.check("publish killed once its artifacts commit is made", fault_log)


def test_publish_killed_mid_push(killed, fault_log):
    """The first file has appeared in the remote folder: an object half written, maybe under its final name."""
    assert killed.kill_when(lambda: bool(killed.remote_files()))
    killed.check("publish killed mid-push (first file on the remote)", fault_log)


def test_publish_killed_after_the_push_before_tagging(killed, fault_log):
    assert killed.kill_when(lambda: all(o.is_file() for o in killed.objects))
    killed.check("publish killed after the push, before tagging", fault_log)


def test_publish_killed_mid_tag_push(killed, fault_log):
    """Origin is receiving the tags (its pre-receive hook runs, and sleeps): the push dies with the publish."""
    started = killed.origin / "receiving"
    killed.hook.write_text(f"#!/bin/sh\ntouch {started}\nsleep 60\n")
    killed.hook.chmod(0o755)
    assert killed.kill_when(started.exists)
    started.unlink()
    killed.check("publish killed mid-tag-push (origin receiving)", fault_log)


def test_publish_killed_at_random_points(killed, fault_log):
    """Delays uniform over an uninterrupted publish's duration (measured once, in `killed`)."""
    draw = rng("publish killed at a random point")
    for _ in range(trials()):
        code = killed_at_random([sys.executable, *PUBLISH], killed.farm.root, killed.farm.env,
                                draw.uniform(0, killed.duration))
        killed.check("publish killed at a random point", fault_log, killed=code is None)


def test_publish_interrupted_before_committing_its_declaration(killed, fault_log):
    """Killed between writing dvc.yaml's artifacts section and committing it (a window too short to hit by polling,
    so made by hand: the section written, git's index.lock and HEAD.lock held). The rerun names the locks; without
    them, finishes, committing the declaration before tagging."""
    (killed.farm.root / "dvc.yaml").write_text(killed.declared)
    (killed.farm.root / ".git" / "index.lock").touch()
    (killed.farm.root / ".git" / "HEAD.lock").touch()
    killed.check("publish killed while committing its declaration", fault_log)
