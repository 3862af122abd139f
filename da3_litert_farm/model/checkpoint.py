"""Checkpoint stage: put a model's weights, once, in artifacts/checkpoints/MODEL/ in the Hub layout.

Run by the DVC stage in stages/checkpoint.py, once per model.

Sources (params.yaml `models.MODEL.source`); `key` below is where the model's settings sit in
params.yaml (e.g. models.small), which the errors name:
- hub: `repo` at `revision` through huggingface_hub and its normal cache. If the files
  are cached, no network is used. Offline with nothing cached fails in seconds.
- local: a directory holding config.json + model.safetensors (keys prefixed `model.`).
- random: seeded stress weights (da3_litert_farm.model.stress), for dry runs and tests only;
  `outliers: true` plants DINOv2-like outlier channels, to test FP16 fidelity.
Whatever the source, the result is loaded strictly into the official model before it is
written, and its sha256 is recorded in provenance.json.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from urllib.parse import urlparse

from da3_litert_farm.core import fileio
from da3_litert_farm.model.official import CheckpointError
from da3_litert_farm.config.params import HUB_FILES, CheckpointParams
from da3_litert_farm.model.weights import WEIGHTS_FILE, load_official_from_dir, read_model_name, write_hub_layout

_PROBE_TIMEOUT_S = 3.0


def fetch_from_hub(repo: str, revision: str, cache_dir: Path | str | None = None,
                   key: str = "models.MODEL") -> tuple[Path, str]:
    """Both Hub files at `revision`, from the HF cache or the network: (snapshot dir, commit).

    `cache_dir` defaults to huggingface_hub's own (HF_HOME / HF_HUB_CACHE).
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (GatedRepoError, HTTPError, LocalEntryNotFoundError, RemoteEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError, XetDownloadError)

    def download(local_only: bool) -> Path:
        files = [Path(hf_hub_download(repo, f, revision=revision, cache_dir=cache_dir,
                                      local_files_only=local_only)) for f in HUB_FILES]
        return files[0].parent

    try:
        snapshot = download(local_only=True)
    except LocalEntryNotFoundError:
        _require_hub_reachable(repo, revision, key)
        try:
            snapshot = download(local_only=False)
        # The Hub answered, and said no: the params are wrong, or the token is missing.
        except RevisionNotFoundError:
            raise CheckpointError(f"{key}.revision {revision!r}: revision not found in {repo} on the Hub; "
                                  f"give a branch, tag or commit of that repository") from None
        except GatedRepoError:
            raise CheckpointError(f"{repo} is gated: accept its terms on the Hub with your account, then log in "
                                  f"(`hf auth login`) or set HF_TOKEN") from None
        except RepositoryNotFoundError:
            raise CheckpointError(f"{key}.repo {repo!r}: repository not found on the Hub, or private and "
                                  f"no token given that may read it (`hf auth login` or HF_TOKEN)") from None
        except RemoteEntryNotFoundError as exc:
            raise CheckpointError(f"{repo}@{revision} lacks a file the farm needs ({' + '.join(HUB_FILES)}): "
                                  f"{exc}") from None
        # No answer, or a broken one: the network (LocalEntryNotFoundError here means it failed
        # with nothing cached). Anything else is a bug and keeps its own traceback.
        except (OSError, HTTPError, XetDownloadError) as exc:
            raise CheckpointError(_offline_help(repo, revision, f"download failed: {exc}", key)) from None
    return snapshot, snapshot.name  # the HF cache names each snapshot folder by its commit


def _require_hub_reachable(repo: str, revision: str, key: str) -> None:
    """Fail in seconds, not after huggingface_hub's minute of retries, when offline."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise CheckpointError(_offline_help(repo, revision, "HF_HUB_OFFLINE is set and nothing is cached", key))
    endpoint = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=_PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        raise CheckpointError(_offline_help(repo, revision, f"{endpoint.hostname} is unreachable ({exc})",
                                           key)) from None


def _offline_help(repo: str, revision: str, reason: str, key: str) -> str:
    return (
        f"{key}.source is 'hub' but {repo}@{revision} is not in the Hugging Face cache and "
        f"cannot be downloaded: {reason}.\n"
        f"  - pre-download on a connected machine: hf download {repo} {' '.join(HUB_FILES)} "
        f"--revision {revision}  (then copy ~/.cache/huggingface or set HF_HOME), or\n"
        f"  - set {key}.source: local and {key}.path to a directory with {' + '.join(HUB_FILES)}, or\n"
        f"  - set {key}.source: random for a dry run with stress weights (not for shipping)."
    )


def build_checkpoint(params: CheckpointParams, out_dir: Path, key: str = "models.MODEL") -> dict:
    """Materialize the configured checkpoint into out_dir; return its provenance."""
    provenance = {"source": params.source, "repo": None, "revision": None, "resolved_revision": None,
                  "path": None, "seed": None, "outliers": None}
    if params.source == "random":
        from da3_litert_farm.model.stress import stress_model

        write_hub_layout(out_dir, stress_model(params.seed, params.preset, outliers=params.outliers), params.preset)
        provenance.update(seed=params.seed, outliers=params.outliers)
    else:
        if params.source == "hub":
            src, commit = fetch_from_hub(params.repo, params.revision, key=key)
            provenance.update(repo=params.repo, revision=params.revision, resolved_revision=commit)
        else:
            src = Path(params.path)
            provenance["path"] = params.path  # load_params checked the two files exist
        for f in HUB_FILES:
            shutil.copyfile(src / f, out_dir / f)
    provenance["model_name"] = read_model_name(out_dir)
    if provenance["model_name"] != params.preset:
        where = params.repo if params.source == "hub" else params.path
        raise CheckpointError(f"{key}.preset is {params.preset!r}, but {where}'s {HUB_FILES[0]} says model_name "
                              f"{provenance['model_name']!r}: set {key}.preset: {provenance['model_name']} "
                              f"(or point the checkpoint at a {params.preset} one)")
    load_official_from_dir(out_dir)  # strict: what downstream stages will load, checked once
    provenance["weights_sha256"] = fileio.sha256_file(out_dir / WEIGHTS_FILE)
    return provenance
