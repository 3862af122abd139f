"""`make remote`: the committed DVC remote, pointed at S3 or SSH in a real DVC repository, never with a credential."""

from __future__ import annotations

import configparser
import subprocess
import sys

import pytest

from da3_litert_farm.ops.remote import RemoteConfigError, check_url, main


@pytest.fixture
def dvc_repo(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "remote", "add", "-d", "storage", "../../da3-farm-remote"],
                   cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def committed(repo) -> dict[str, str]:
    """The `storage` section of .dvc/config, read as a clone would read it."""
    config = configparser.ConfigParser()
    config.read(repo / ".dvc" / "config")
    return dict(config["'remote \"storage\"'"])  # DVC writes the section name quoted


@pytest.mark.parametrize("url, message", [
    ("s3://key:secret@bucket/da3", "holds a password: credentials never go in the repository"),
    ("ssh://bob:hunter2@host/srv", "holds a password"),
    ("ftp://host/srv", "remote kind 'ftp' is not one the farm tests"),
    ("s3:///da3", "names no bucket"),
    ("ssh:///srv", "names no host"),
])
def test_urls_a_remote_may_not_have(url, message):
    with pytest.raises(RemoteConfigError, match=message):
        check_url(url)


def test_pointing_the_committed_remote_at_s3_then_ssh(dvc_repo, capsys):
    assert main([]) == 0
    assert "only this machine can pull" in capsys.readouterr().out  # the default: a folder beside the checkout

    assert main(["s3://team-models/da3", "--endpoint", "https://s3.example.com"]) == 0
    assert committed(dvc_repo) == {"url": "s3://team-models/da3", "endpointurl": "https://s3.example.com"}
    assert "git commit .dvc/config" in capsys.readouterr().out
    assert main(["s3://other-bucket/da3"]) == 0  # same kind: the endpoint stays
    assert committed(dvc_repo) == {"url": "s3://other-bucket/da3", "endpointurl": "https://s3.example.com"}

    assert main(["ssh://builder@models.example.com/srv/da3"]) == 0  # another kind: S3's options go
    assert committed(dvc_repo) == {"url": "ssh://builder@models.example.com/srv/da3"}
    assert not (dvc_repo / ".dvc" / "config.local").exists()

    assert main(["s3://k:s@b/da3"]) == 1
    assert "holds a password" in capsys.readouterr().err
    assert committed(dvc_repo) == {"url": "ssh://builder@models.example.com/srv/da3"}  # refused before any change
