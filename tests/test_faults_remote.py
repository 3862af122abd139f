"""The DVC remote going down mid-push, and a corrupted DVC cache (issue 30, items 4 and 5).

- S3 (moto, behind a TCP proxy on loopback that is cut: every connection reset, new ones refused, while moto
  keeps its state): publish fails naming the remote and tags nothing, here or on origin; a client's pull of an
  earlier version meanwhile is refused naming the remote; once the proxy is back a rerun publishes, and every
  object in the bucket hashes to its key.
- SSH (OpenSSH's sshd, SIGKILLed with its per-connection children, then started again on the same port with
  the same host key): the same.
- A flipped byte in the DVC cache object of a shipped model: publish rewrites it from the workspace copy (which
  matches dvc.lock and the catalog) before `dvc push` could upload it; a remote object corrupted by hand is
  refused by the client's sha256 check; a corrupted workspace model is made right again by `dvc repro`.

Each trial goes into the fault log (docs/reliability.md); a broken invariant fails the test too.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from da3_litert_farm.core.fileio import sha256_file
from tests.farm_repo import Farm, ran_stages, restored_stages
from tests.fault_farm import (ASPECTS, PUBLISH, copy_farm, folder_objects, md5_file, publish, read_folder,
                              remote_problems, run, tags)
from tests.fault_proxy import proxy
from tests.remote_servers import s3_server, ssh_server, sshd_again

FARM_BIN = Path(sys.executable).parent / "farm"
PULL = ("pull", "--allow-stress", "--allow-unsigned", "--aspect", "9x16")
# A cut remote must fail a publish in bounded time, whatever the plugins' retries (measured: S3 12-30 s, SSH < 1 s).
FAIL_WITHIN_S = 120
# A version's tags (its catalog's, one per aspect, the bundle's), and the objects it pushes (each model, the
# bundle and its folder's manifest).
TAGS = OBJECTS = len(ASPECTS) + 2


# --- helpers ------------------------------------------------------------------------------------------------------


def farm_copy(template: Farm, dest: Path) -> tuple[Farm, Path]:
    """A copy of the built farm and a bare `origin` that publish pushes its tags to."""
    farm = copy_farm(template, dest)
    origin = dest / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    farm.git("remote", "add", "origin", str(origin))
    return farm, origin


def point_remote(farm: Farm, url: str, *endpoint: str, one_at_a_time: bool = True) -> None:
    """`make remote URL=...`, committed; one upload at a time (a setting of this machine's, .dvc/config.local),
    so that a fault after the first object lands with the others still to come."""
    farm.run("-m", "da3_litert_farm.ops.remote", url, *endpoint)
    farm.commit(f"publish to {url}")
    (farm.root / ".dvc" / "config.local").write_text("['remote \"storage\"']\n    jobs = 1\n" if one_at_a_time else "")


def shipped_sizes(farm: Farm) -> set[int]:
    catalog = farm.catalog()
    return {(farm.root / m["file"]).stat().st_size for m in catalog["models"] + catalog["bundles"]}


def start_publish(farm: Farm) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *PUBLISH], cwd=farm.root, env=farm.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(ready: Callable[[], bool], proc: subprocess.Popen, what: str, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while not ready():
        assert proc.poll() is None, f"publish ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} in {limit_s} s"
        time.sleep(0.05)


def error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("publish: ")]
    return lines[-1] if lines else output


def flip_byte(path: Path, at: int = 4096) -> None:
    """Corrupt one byte in place (DVC keeps its cache objects read-only)."""
    mode = path.stat().st_mode
    path.chmod(0o644)
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0xFF]))
    path.chmod(mode)


def log_failed_push(fault_log, fault: str, pushing: subprocess.Popen, tagged: list[str],
                    rerun: subprocess.CompletedProcess, problems: list) -> None:
    """One trial of a remote failing mid-push: publish must fail with nothing tagged, the rerun must publish, and
    the remote must hold every tagged object with its bytes (`problems`: what it lacks or holds wrong)."""
    ok = pushing.returncode != 0 and not tagged
    fault_log.add(fault, "failed, nothing tagged; rerun published" if ok and rerun.returncode == 0 else
                  f"publish exit {pushing.returncode}, tags {tagged}, rerun exit {rerun.returncode}",
                  consistent=ok and not problems, data_lost=bool(problems))


def committed_url(repo: Path, ref: str) -> str:
    config = run(["git", "show", f"{ref}:.dvc/config"], cwd=repo, env=os.environ).stdout
    return next(line.split("=", 1)[1].strip() for line in config.splitlines() if line.strip().startswith("url"))


def version_tags(repo: Path | str, version: str) -> list[str]:
    return [ref for ref in tags(repo) if ref.endswith(f"v{version}")]


# --- 4c: a silent S3 remote ----------------------------------------------------------------------------------------

# How long a test lets a push stand still before publish gives up (the default, PUSH_STALL_S, is minutes).
STALL_S = 6


def test_a_silent_s3_remote_fails_the_publish_in_bounded_time(fault_template, fault_log, tmp_path):
    """The network drops every packet after the first object (connections accepted, nothing answered): DVC's
    S3 plugin would retry for many minutes; publish stops the push once it has moved no byte for a while, names
    the remote, tags nothing; once the network is back the rerun publishes."""
    farm, origin = farm_copy(fault_template, tmp_path)
    with s3_server(tmp_path) as s3, proxy(int(s3.endpoint.rsplit(":", 1)[1])) as cable:
        farm.env.update({**s3.credentials(), "FARM_PUSH_STALL_S": str(STALL_S)})
        url = f"s3://{s3.bucket}/silent"
        point_remote(farm, url, "--endpoint", cable.url)
        pushing = start_publish(farm)
        sizes = shipped_sizes(farm)
        import boto3

        bucket = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                              aws_access_key_id=s3.key_id, aws_secret_access_key=s3.secret)
        wait_for(lambda: any(o["Size"] in sizes for o in bucket.list_objects_v2(Bucket=s3.bucket).get("Contents", [])),
                 pushing, "model in the bucket")
        cable.freeze()
        frozen = time.monotonic()
        out, err = pushing.communicate(timeout=600)
        failed_s = time.monotonic() - frozen
        tagged = version_tags(farm.root, "0.1.0") + version_tags(origin, "0.1.0")
        cable.thaw()
        rerun = publish(farm)
        problems = remote_problems(farm.root, lambda ref, oid: _s3_object(bucket, s3.bucket, "silent", oid))
    print(f"S3 silent after the first object: publish gave up {failed_s:.1f} s later; rerun: {rerun.returncode}")
    ok = pushing.returncode == 1 and not tagged and failed_s < FAIL_WITHIN_S
    fault_log.add("S3 remote silent mid-push (packets dropped after the first object)",
                  "publish gave up, naming the remote, nothing tagged; rerun published" if ok and rerun.returncode == 0
                  else f"publish exit {pushing.returncode} after {failed_s:.0f} s, tags {tagged}",
                  consistent=ok and not problems, data_lost=bool(problems))
    assert pushing.returncode == 1 and not tagged, (out, err, tagged)
    assert f"dvc push to the DVC remote 'storage' ({url}) stopped moving data for {STALL_S} s" in error_line(err), err
    assert failed_s < FAIL_WITHIN_S, failed_s
    assert rerun.returncode == 0 and len(version_tags(origin, "0.1.0")) == TAGS, rerun.stderr
    assert problems == [], problems


def _s3_object(client, bucket: str, prefix: str, oid: str) -> bytes | None:
    try:
        return client.get_object(Bucket=bucket, Key=f"{prefix}/files/md5/{oid[:2]}/{oid[2:]}")["Body"].read()
    except client.exceptions.NoSuchKey:
        return None


# --- 4a: S3 cut mid-push ------------------------------------------------------------------------------------------


def test_s3_remote_cut_mid_push(fault_template, fault_log, tmp_path):
    import boto3

    farm, origin = farm_copy(fault_template, tmp_path)
    with s3_server(tmp_path) as s3, proxy(int(s3.endpoint.rsplit(":", 1)[1])) as cable:
        farm.env.update(s3.credentials())
        bucket = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",  # moto itself, no proxy
                              aws_access_key_id=s3.key_id, aws_secret_access_key=s3.secret)
        listing = lambda prefix: bucket.list_objects_v2(Bucket=s3.bucket, Prefix=prefix).get("Contents", [])
        keys = lambda prefix: [o["Key"] for o in listing(prefix)]
        # 0.1.0, published whole: what a client pulls while the remote is down.
        point_remote(farm, f"s3://{s3.bucket}/v1", "--endpoint", cable.url, one_at_a_time=False)
        first = publish(farm)
        assert first.returncode == 0, first.stderr
        doc = farm.params
        doc["catalog"]["version"] = "0.2.0"
        farm.set_params(doc)
        farm.repro()
        url = f"s3://{s3.bucket}/v2"  # a folder of its own: every object of 0.2.0 is still to push
        point_remote(farm, url, "--endpoint", cable.url)

        pushing = start_publish(farm)
        sizes = shipped_sizes(farm)
        wait_for(lambda: any(o["Size"] in sizes for o in listing("v2/files/")), pushing, "model in the bucket")
        cable.cut()
        cut = time.monotonic()
        arrived = keys("v2/files/")
        pull_ended: list[tuple[float, int]] = []  # when, exit code

        def pull() -> None:
            with open(tmp_path / "pull.log", "w") as log:
                proc = subprocess.run([FARM_BIN, *PULL, "--repo", farm.root, "--version", "0.1.0", "--out",
                                       tmp_path / "app"], cwd=tmp_path, env=farm.env, stdout=log,
                                      stderr=subprocess.STDOUT, timeout=600)
            pull_ended.append((time.monotonic(), proc.returncode))

        puller = threading.Thread(target=pull)
        puller.start()
        out, err = pushing.communicate(timeout=600)
        failed_s = time.monotonic() - cut
        puller.join()
        pulled, (pull_s, pull_rc) = (tmp_path / "pull.log").read_text(), pull_ended[0]
        pull_s -= cut
        tagged = version_tags(farm.root, "0.2.0") + version_tags(origin, "0.2.0")
        cable.restore()
        rerun = publish(farm)

        problems = remote_problems(farm.root, lambda ref, oid: _s3_object(
            bucket, s3.bucket, committed_url(farm.root, ref).split("/", 3)[3], oid))
        wrong = [key for key in keys("") if hashlib.md5(bucket.get_object(Bucket=s3.bucket, Key=key)["Body"].read())
                 .hexdigest() != "".join(key.split("/")[-2:]).removesuffix(".dir")]

    print(f"S3 cut after {len(arrived)} object(s): publish failed {failed_s:.1f} s after the cut, the pull "
          f"{pull_s:.1f} s after; rerun: {rerun.returncode}")
    log_failed_push(fault_log, "S3 remote down mid-push (connections cut after the first object)", pushing, tagged,
                    rerun, problems + wrong)
    fault_log.add("client pull while the S3 remote is down",
                  "refused, naming the remote" if pull_rc and "DVC remote 'storage'" in pulled
                  else pulled.strip()[-200:],
                  consistent=not (tmp_path / "app").exists())

    assert len(arrived) < OBJECTS, f"the cut came after the whole push: {arrived}"
    assert pushing.returncode == 1 and not tagged, (out, err, tagged)
    assert f"DVC remote 'storage' ({url})" in error_line(err), err
    assert failed_s < FAIL_WITHIN_S
    assert pull_rc == 1 and f"DVC remote 'storage' (s3://{s3.bucket}/v1)" in pulled, pulled
    assert not (tmp_path / "app").exists()  # nothing written for the refused pull
    assert rerun.returncode == 0 and "published da3-small-litert 0.2.0" in rerun.stdout, rerun.stderr
    assert len(version_tags(farm.root, "0.2.0")) == TAGS
    assert version_tags(origin, "0.2.0") == version_tags(farm.root, "0.2.0")
    assert problems == [] and wrong == [], (problems, wrong)


# --- 4b: SSH server killed mid-push -------------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (sshd's per-connection children run in sessions of their own)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_ssh_server_killed_mid_push(fault_template, fault_log, tmp_path):
    farm, origin = farm_copy(fault_template, tmp_path)
    folder = tmp_path / "ssh-remote"
    shipped = shipped_sizes(farm)
    with ssh_server(tmp_path) as ssh:
        farm.env["HOME"] = str(ssh.home)  # the client key and known_hosts
        url = ssh.url(folder)
        point_remote(farm, url)
        sshd = int((tmp_path / "sshd" / "sshd.pid").read_text())
        pushing = start_publish(farm)
        # The first shipped file whole in the remote folder (DVC writes a hidden temporary file, then renames it).
        wait_for(lambda: any(p.stat().st_size in shipped for p in folder_objects(folder).values()), pushing,
                 "object in the remote folder")
        children = descendants(sshd)
        for pid in [sshd, *children]:
            os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        arrived = sorted(folder_objects(folder))
        out, err = pushing.communicate(timeout=600)
        failed_s = time.monotonic() - killed
        down = refused(ssh.port)
        tagged = version_tags(farm.root, "0.1.0") + version_tags(origin, "0.1.0")
        with sshd_again(ssh):
            rerun = publish(farm)
    leftovers = [p.name for p in (folder / "files" / "md5").glob("*/.*")]
    problems = remote_problems(farm.root, read_folder(folder))
    wrong = [oid for oid, p in folder_objects(folder).items() if md5_file(p) != oid.removesuffix(".dir")]
    print(f"sshd killed with {len(children)} child(ren) after {len(arrived)} object(s): publish failed "
          f"{failed_s:.1f} s after; rerun: {rerun.returncode}; DVC's temporary files left on the remote: {leftovers}")

    log_failed_push(fault_log, "SSH server killed mid-push (sshd SIGKILLed after the first object)", pushing, tagged,
                    rerun, problems + wrong)
    assert down, "sshd still answers"
    assert len(arrived) < OBJECTS, f"the kill came after the whole push: {arrived}"
    assert pushing.returncode == 1 and not tagged, (out, err, tagged)
    assert f"DVC remote 'storage' ({url})" in error_line(err), err
    assert failed_s < FAIL_WITHIN_S
    assert rerun.returncode == 0 and "published da3-small-litert 0.1.0" in rerun.stdout, rerun.stderr
    assert len(version_tags(farm.root, "0.1.0")) == TAGS
    assert version_tags(origin, "0.1.0") == version_tags(farm.root, "0.1.0")
    assert problems == [] and wrong == [], (problems, wrong)


# --- 5: a corrupted DVC cache ----------------------------------------------------------------------------------------


def test_corrupted_cache_is_repaired_before_push_and_never_served(fault_template, fault_log, tmp_path, monkeypatch):
    farm, _ = farm_copy(fault_template, tmp_path)
    farm.git("remote", "remove", "origin")
    remote = tmp_path / "da3-farm-remote"
    lock = {o["path"]: o["md5"] for s in farm.lock().values() for o in s.get("outs", [])}
    catalogued = {m["aspect"]: m for m in farm.catalog()["models"]}
    model = catalogued["9x16"]["file"]
    cached = farm.root / ".dvc" / "cache" / "files" / "md5" / lock[model][:2] / lock[model][2:]
    assert cached.stat().st_ino != (farm.root / model).stat().st_ino  # DVC's default cache type copies

    # A flipped byte in the cache object: before the fix, publish pushed it as it was (the remote got the
    # corrupt bytes, and every client of 0.1.0 was refused); now it is rewritten from the workspace copy.
    flip_byte(cached)
    published = publish(farm)
    problems = remote_problems(farm.root, read_folder(remote))
    fault_log.add("a shipped model's DVC cache object corrupted before publish",
                  "repaired from the workspace copy, then published" if published.returncode == 0 and not problems
                  else f"exit {published.returncode}: {problems or error_line(published.stderr)}",
                  consistent=not problems, data_lost=bool(problems))
    assert published.returncode == 0, published.stderr
    assert f"the DVC cache copy of {model} ({cached}) was corrupt" in published.stderr
    assert problems == [] and md5_file(cached) == lock[model]

    # A remote object corrupted by hand: the client's sha256 check refuses it and writes nothing.
    flip_byte(remote / "files" / "md5" / lock[model][:2] / lock[model][2:])
    app = tmp_path / "app"
    pull = run([FARM_BIN, *PULL, "--repo", farm.root, "--version", "0.1.0", "--out", app], cwd=tmp_path, env=farm.env)
    fault_log.add("a remote model object corrupted, then pulled",
                  "refused: sha256 mismatch, nothing written" if pull.returncode and not app.exists()
                  else f"exit {pull.returncode}", consistent=not app.exists(), data_lost=app.exists())
    assert pull.returncode == 1 and f"sha256 mismatch for {model} (catalog 0.1.0)" in pull.stderr, pull.stderr
    assert not app.exists()

    # A corrupted workspace model: `dvc repro` makes it the catalogued file again.
    other = catalogued["16x9"]
    flip_byte(farm.root / other["file"])
    _, output = farm.repro()
    restored, reran = restored_stages(output), ran_stages(output)
    good = sha256_file(farm.root / other["file"]) == other["sha256"]
    fault_log.add("a shipped model corrupted in the workspace, then `dvc repro`",
                  (f"{'restored from the run-cache' if restored else 'rebuilt'} ({', '.join(sorted(restored | reran))})"
                   + ("" if good else ", still corrupt")), consistent=good, data_lost=not good)
    print(f"dvc repro after a corrupted workspace model: ran {sorted(reran)}, restored {sorted(restored)}")
    assert good and (restored | reran) and not farm.git("status", "--porcelain").strip()

    # Both copies corrupt: refused, naming the file and the way out; nothing rewritten.
    from da3_litert_farm.ops.cache_check import CacheError, check_cache

    flip_byte(cached)
    flip_byte(farm.root / model)
    corrupt = cached.read_bytes()
    monkeypatch.chdir(farm.root)
    with pytest.raises(CacheError, match=rf"the DVC cache copy of {model} .* is corrupt .* run `dvc repro`"):
        check_cache([model])
    assert cached.read_bytes() == corrupt
