"""Download a published file through DVC from the remote committed at a tag, naming the errors an
app build meets: a missing plugin (and the extra that brings it), refused credentials, a missing
bucket, an unreachable host (after a bounded wait). Standard library and DVC only."""

from __future__ import annotations

import configparser
import contextlib
import re
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.git import GitError, git

# The client's extras that bring each DVC plugin (pyproject.toml [project.optional-dependencies]).
EXTRAS = {"s3": "s3", "ssh": "ssh"}
# How long a remote host may take to answer before the pull gives up (DVC's defaults wait minutes).
CONNECT_TIMEOUT_S = 15
# How long the first byte may take, whatever the plugin's own retries: a host that accepts the
# connection and then says nothing would otherwise hold an app build for many minutes.
ANSWER_TIMEOUT_S = 45
# Per scheme, the DVC remote options that bound that wait (DVC refuses options a scheme lacks).
TIMEOUTS = {"s3": {"connect_timeout": CONNECT_TIMEOUT_S, "read_timeout": 60},
            "ssh": {"timeout": CONNECT_TIMEOUT_S}}
CREDENTIALS = {"s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws/credentials",
               "ssh": "a key in ~/.ssh or an SSH agent (ssh-add)"}


class RemoteError(FarmError, RuntimeError):
    """The file could not be downloaded; the message says why and what to do."""


def missing_plugin(error: str, repo: str, rev: str) -> str | None:
    """DVC refuses to read a config whose remote has options of a plugin it lacks ("extra keys not allowed @
    data['remote']['storage']['endpointurl']"): then say which extra brings that plugin, from the remote's URL."""
    named = re.search(r"data\['remote'\]\['([^']+)'\]", error)
    if named is None:
        return None
    config = configparser.ConfigParser()
    with contextlib.suppress(configparser.Error, OSError, GitError):
        config.read_string(_committed_config(repo, rev))
    url = config.get(f"'remote \"{named[1]}\"'", "url", fallback="")
    kind = scheme(url)
    if kind not in EXTRAS:
        return None
    return (f"the DVC remote {named[1]!r} ({url}) needs DVC's {kind} plugin, which this install lacks: "
            f'pip install "da3-litert-farm[{EXTRAS[kind]}]"')


def _committed_config(repo: str, rev: str) -> str:
    """.dvc/config at `rev`, read with git alone (DVC cannot load it without the plugin)."""
    if Path(repo).is_dir():
        return git("show", f"{rev}:.dvc/config", cwd=repo)
    with tempfile.TemporaryDirectory() as clone:
        git("clone", "--quiet", "--depth", "1", "--branch", rev, "--no-checkout", repo, clone)
        return git("show", "HEAD:.dvc/config", cwd=clone)


def dvc_url(repo: str) -> str:
    """The repository as DVC should open it at a tag: a local folder as a file:// URL, so that DVC reads that
    tag's .dvc/config alone (given a folder, it mixes in the working tree's config and local overrides)."""
    return Path(repo).resolve().as_uri() if Path(repo).is_dir() else repo


def remote_of(repo: str, rev: str, name: str | None) -> tuple[str, str]:
    """(name, URL as written) of the DVC remote committed in `repo` at `rev`: `name`, or the default."""
    config = configparser.ConfigParser()
    try:
        config.read_string(_committed_config(repo, rev))
    except (configparser.Error, OSError, GitError) as exc:
        raise RemoteError(f"cannot read .dvc/config of {repo} at {rev}: {exc}") from None
    remotes = {m[1]: section for section in config.sections() if (m := re.fullmatch(r"'remote \"(.+)\"'", section))}
    name = name or config.get("core", "remote", fallback=None)
    if not name:
        raise RemoteError(f"{repo} at {rev} has no default DVC remote (.dvc/config core.remote); the farm's "
                          f"maintainers must commit one before publishing")
    if name not in remotes:
        raise RemoteError(f"{repo} at {rev} has no DVC remote {name!r}; it has {sorted(remotes)}")
    return name, config.get(remotes[name], "url")


def scheme(url: str) -> str:
    found = urlsplit(url).scheme
    return found if len(found) > 1 else "local"  # a Windows drive letter is a path


def download(path: str, repo: str, rev: str, remote: str | None, dest: Path) -> None:
    """Copy `path` (a DVC-tracked file of `repo` at `rev`) from its remote into `dest`."""
    import dvc.api
    from dvc_objects.fs.errors import RemoteMissingDepsError

    name, url = remote_of(repo, rev, remote)
    kind = scheme(url)
    where = f"DVC remote {name!r} ({url})"
    overrides = dict(TIMEOUTS.get(kind, {}))
    if kind == "local" and Path(repo).is_dir() and not Path(url).is_absolute():
        # Written relative to the repository's .dvc folder; DVC opens the tag in a clone elsewhere.
        overrides["url"] = str((Path(repo).resolve() / ".dvc" / url).resolve())
    received, failure = [0], []

    def copy() -> None:
        try:
            with dvc.api.open(path, repo=dvc_url(repo), rev=rev, remote=name, mode="rb",
                              remote_config=overrides or None) as src, open(dest, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                    received[0] += len(chunk)
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread, named below)
            failure.append(exc)

    # In a thread of its own, so that a host that never answers is given up on: the thread is
    # a daemon, and the caller removes `dest`'s folder.
    worker = threading.Thread(target=copy, daemon=True)
    started = time.monotonic()
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
        if not received[0] and time.monotonic() - started > ANSWER_TIMEOUT_S:
            raise RemoteError(f"no answer from the {where} in {ANSWER_TIMEOUT_S} s: the host accepts connections but "
                              f"sends nothing; check the host, the network or a VPN")
    if not failure:
        return
    exc = failure[0]
    # DVC says a plugin is missing in two ways: this error, or an ImportError "s3 is supported, but requires 'dvc-s3'".
    unsupported = re.match(r"(\w+) is supported, but requires 'dvc-", str(exc)) if isinstance(exc, ImportError) else None
    if isinstance(exc, RemoteMissingDepsError) or unsupported:
        protocol = exc.protocol if isinstance(exc, RemoteMissingDepsError) else unsupported[1]
        extra = EXTRAS.get(protocol)
        fix = f'pip install "da3-litert-farm[{extra}]"' if extra else f'pip install "dvc[{protocol}]"'
        raise RemoteError(f"the {where} needs DVC's {protocol} plugin, which this install lacks: {fix}")
    if type(exc).__name__ == "PathMissingError" and kind == "s3" and not _bucket_exists(repo, rev, name, url):
        raise RemoteError(f"the {where} names bucket {urlsplit(url).netloc!r}, which does not exist on that "
                          f"endpoint: the remote committed at {rev} is wrong, or the bucket was deleted")
    raise RemoteError(explain(exc, kind, where))


def _bucket_exists(repo: str, rev: str, name: str, url: str) -> bool:
    from dvc.repo import Repo

    try:
        with Repo.open(dvc_url(repo), rev=rev, subrepos=False, uninitialized=True) as dvc_repo:
            return bool(dvc_repo.cloud.get_remote(name).fs.exists(urlsplit(url).netloc))
    except Exception:  # noqa: BLE001 (the probe only refines a message; the original error stands)
        return True


def _chain(exc: BaseException) -> list[BaseException]:
    out = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def explain(exc: BaseException, kind: str, where: str) -> str:
    """One sentence for the failure, from the first cause in the chain that names it."""
    credentials = CREDENTIALS.get(kind, "its credentials")
    for cause in _chain(exc):
        text, type_name = str(cause).strip()[:200], type(cause).__name__
        if type_name == "NoCredentialsError":
            return f"no credentials for the {where}: set {credentials}"
        if type_name in ("PermissionDenied", "PermissionError") or any(
                code in text for code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden")):
            return f"the {where} refused the credentials ({type_name}: {text}); check {credentials}"
        if "NoSuchBucket" in text:
            return f"the {where} names a bucket that does not exist ({text})"
        if type_name == "PathMissingError":
            return (f"the {where} has no copy of the file: it was never pushed there (make publish pushes before it "
                    f"tags) or it was deleted")
        if isinstance(cause, TimeoutError) or type_name == "ConnectTimeoutError":
            return (f"no answer from the {where} within {CONNECT_TIMEOUT_S} s ({type_name}); check the host, the "
                    f"network or a VPN")
        if isinstance(cause, ConnectionError) or type_name in (
                "EndpointConnectionError", "ConnectionLost", "DisconnectError"):
            return f"cannot reach the {where} ({type_name}: {text}); check the host, the network or a VPN"
    return f"the {where} failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
