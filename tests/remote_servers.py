"""Real DVC remote servers for the tests, on 127.0.0.1 only, started and stopped by the tests.

- S3: moto's server (`python -m moto.server`) with IAM authentication on: a user, its access
  key and a bucket are made first; every later request must be signed with that key.
- SSH: OpenSSH's own sshd (installed by `make test`: da3_litert_farm.dev.sshd_setup) with a
  throwaway host key and a throwaway client key, in a HOME of the test's own.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from da3_litert_farm.dev.sshd_setup import find_sshd

STARTUP_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(ready, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}")
        with contextlib.suppress(OSError):
            if ready():
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not start in {STARTUP_S} s")


@contextlib.contextmanager
def _process(cmd: list[str], log: Path, env: dict | None = None) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass(frozen=True)
class S3:
    endpoint: str
    bucket: str
    key_id: str
    secret: str

    def credentials(self) -> dict[str, str]:
        """The environment a client reads its AWS credentials from."""
        return {"AWS_ACCESS_KEY_ID": self.key_id, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_DEFAULT_REGION": "us-east-1"}


# Unauthenticated requests moto answers before it enforces IAM: create the user, its key, its policy.
_SETUP_ACTIONS = 3


@contextlib.contextmanager
def s3_server(workdir: Path, bucket: str = "farm-models") -> Iterator[S3]:
    import boto3

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_ACTIONS)}
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with _process(cmd, workdir / "moto.log", env) as proc:
        _wait_for(lambda: urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).status == 200, proc, "moto")
        setup = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "setup",
                 "aws_secret_access_key": "setup"}
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="farm")
        key = iam.create_access_key(UserName="farm")["AccessKey"]
        iam.put_user_policy(UserName="farm", PolicyName="s3", PolicyDocument=(
            '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}'))
        server = S3(endpoint, bucket, key["AccessKeyId"], key["SecretAccessKey"])
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=server.key_id,
                     aws_secret_access_key=server.secret).create_bucket(Bucket=bucket)
        yield server


@dataclass(frozen=True)
class SSH:
    port: int
    user: str
    home: Path  # a HOME whose ~/.ssh holds the client key and the server's host key

    def url(self, path: Path) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}{path}"


@contextlib.contextmanager
def ssh_server(workdir: Path) -> Iterator[SSH]:
    sshd = find_sshd()
    if sshd is None:
        raise RuntimeError("sshd is not installed: run `make test` (da3_litert_farm.dev.sshd_setup installs it)")
    keygen = shutil.which("ssh-keygen")
    work, home = workdir / "sshd", workdir / "ssh-home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    work.mkdir(mode=0o700)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", work / "host_key"], check=True)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", home / ".ssh" / "id_ed25519"], check=True)
    shutil.copy(home / ".ssh" / "id_ed25519.pub", work / "authorized_keys")
    port = free_port()
    host_key = (work / "host_key.pub").read_text().split()[:2]
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_key)}\n")
    (work / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {work / 'host_key'}\n"
        f"AuthorizedKeysFile {work / 'authorized_keys'}\nPidFile {work / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        "StrictModes no\nUsePAM no\nSubsystem sftp internal-sftp\n")
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    with _process([sshd, "-D", "-e", "-f", str(work / "sshd_config")], work / "sshd.log") as proc:
        def banner() -> bool:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
                return conn.recv(4).startswith(b"SSH-")

        _wait_for(banner, proc, "sshd")
        yield SSH(port, getpass.getuser(), home)


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never answers: a host that hangs."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


@contextlib.contextmanager
def sshd_again(ssh: SSH) -> Iterator[subprocess.Popen]:
    """Start ssh_server's sshd again, after a test killed it: same config, so the same port and host key
    (clients' known_hosts still match)."""
    work = ssh.home.parent / "sshd"

    def banner() -> bool:
        with socket.create_connection(("127.0.0.1", ssh.port), timeout=2) as conn:
            return conn.recv(4).startswith(b"SSH-")

    with _process([find_sshd(), "-D", "-e", "-f", str(work / "sshd_config")], work / "sshd-again.log") as proc:
        _wait_for(banner, proc, "sshd")
        yield proc
