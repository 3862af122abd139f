"""Where `make publish` pushes the models, and where app builds pull them from: the DVC remote
committed in .dvc/config (a client cloning a tag sees only that file, never .dvc/config.local).

    make remote                                  show it
    make remote URL=s3://bucket/da3-farm [ENDPOINT=https://s3.example.com]   point it at S3
    make remote URL=ssh://user@host/srv/da3-farm                             or at an SSH host

The default, `../da3-farm-remote` (a folder beside the checkout, which the first publish
creates), is for trying the farm on one machine: nobody else can pull from it. Credentials never
go in the URL or the repository: DVC reads them where AWS and OpenSSH keep them (environment,
AWS profile, ~/.ssh, an SSH agent).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from urllib.parse import urlsplit

from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.client.remote import scheme
from da3_litert_farm.core.git import GitError

REMOTE = "storage"  # the name .dvc/config gives the default remote
PLUGINS = {"s3": "dvc_s3", "ssh": "dvc_ssh"}  # scheme -> the module of DVC's plugin (the extras s3, ssh)


class RemoteConfigError(FarmError, RuntimeError):
    pass


def check_url(url: str) -> str:
    """The URL's kind; refuse credentials in it and kinds the farm does not install a plugin for."""
    parts = urlsplit(url)
    if parts.password is not None:
        raise RemoteConfigError(f"{url!r} holds a password: credentials never go in the repository; DVC reads them "
                                "from the environment, an AWS profile, ~/.ssh or an SSH agent")
    kind = scheme(url)
    if kind not in ("local", *PLUGINS):
        raise RemoteConfigError(f"remote kind {kind!r} is not one the farm tests; use s3://, ssh:// or a folder")
    if kind == "s3" and not parts.netloc:
        raise RemoteConfigError(f"{url!r} names no bucket: s3://BUCKET/FOLDER")
    if kind == "ssh" and not parts.hostname:
        raise RemoteConfigError(f"{url!r} names no host: ssh://USER@HOST/FOLDER")
    return kind


def dvc(*args: str) -> str:
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "dvc", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RemoteConfigError(f"dvc {' '.join(args)} failed: {(proc.stdout + proc.stderr).strip()}")
    return proc.stdout


def committed_remote() -> tuple[str, str, dict]:
    """(name, URL, options) of the default remote in .dvc/config, as a clone of a tag sees it."""
    from dvc.config import Config

    config = Config.from_cwd(validate=False).load_one("repo")
    name = config.get("core", {}).get("remote")
    if not name or name not in config.get("remote", {}):
        raise RemoteConfigError(".dvc/config names no default remote; run `make remote URL=...`")
    options = dict(config["remote"][name])
    return name, options.pop("url"), options


def local_override(name: str) -> str | None:
    """The remote's URL in .dvc/config.local, if set there: this machine only, app builds never see it."""
    from dvc.config import Config

    local = Config.from_cwd(validate=False).load_one("local")
    return local.get("remote", {}).get(name, {}).get("url")


def describe() -> str:
    name, url, options = committed_remote()
    kind = scheme(url)
    lines = [f"remote {name!r} (.dvc/config): {url}" + (f", endpoint {options['endpointurl']}"
                                                        if "endpointurl" in options else "")]
    if kind == "local":
        lines.append("a folder on this machine: publishing works, but only this machine can pull. Before the first "
                     "real publish: make remote URL=s3://BUCKET/FOLDER (or ssh://USER@HOST/FOLDER)")
    elif importlib.util.find_spec(PLUGINS[kind]) is None:
        lines.append(f"DVC's {kind} plugin is missing here: pip install -e '.[{kind}]' (make installs it)")
    override = local_override(name)
    if override and override != url:
        lines.append(f"WARNING: .dvc/config.local points {name!r} at {override} on this machine only; publish pushes "
                     f"there, but app builds pull from {url}")
    return "\n".join(lines)


def point(url: str, endpoint: str | None) -> str:
    kind = check_url(url)
    if endpoint and kind != "s3":
        raise RemoteConfigError("ENDPOINT is for S3-compatible servers only")
    name, old_url, options = committed_remote()
    if scheme(old_url) != kind:  # the old kind's options (an S3 endpoint) would make DVC refuse the new URL
        for option in options:
            dvc("remote", "modify", name, "--unset", option)
    dvc("remote", "modify", name, "url", url)
    if endpoint:
        dvc("remote", "modify", name, "endpointurl", endpoint)
    return (f"{describe()}\nnow commit it, so that every tag names it: "
            f"git commit .dvc/config -m 'Publish to {url}'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m da3_litert_farm.ops.remote", description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="s3://BUCKET/FOLDER, ssh://USER@HOST/FOLDER or a folder")
    parser.add_argument("--endpoint", help="an S3-compatible server's URL (MinIO, Ceph, R2, ...)")
    args = parser.parse_args(argv)
    try:
        print(point(args.url, args.endpoint) if args.url else describe())
    except (RemoteConfigError, GitError) as exc:
        print(f"remote: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
