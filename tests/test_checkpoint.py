"""Checkpoint loading: Hub layout, strictness, the real Hub cache code, offline failures."""

import json
import shutil
import time

import pytest
import torch
from huggingface_hub import constants
from safetensors.torch import load_file, save_file

from da3_litert_farm.model.checkpoint import build_checkpoint, fetch_from_hub
from da3_litert_farm.core.fileio import sha256_file
from da3_litert_farm.model.official import CheckpointError
from da3_litert_farm.config.params import CheckpointParams
from da3_litert_farm.model.weights import load_official_from_dir, write_hub_layout

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def assert_same_weights(loaded: torch.nn.Module, expected: torch.nn.Module) -> None:
    """Same parameter and buffer names, and under each name the same tensor."""
    got, want = loaded.state_dict(), expected.state_dict()
    assert got.keys() == want.keys(), sorted(got.keys() ^ want.keys())
    for name, tensor in want.items():
        assert torch.equal(got[name], tensor), name


def test_hub_layout_round_trip(stress_net, stress_checkpoint_dir):
    keys = load_file(stress_checkpoint_dir / "model.safetensors").keys()
    assert all(k.startswith("model.") for k in keys)
    # The official model shares one LayerNorm across the aux levels; the Hub file stores it once.
    assert len(keys) < len(stress_net.state_dict())
    loaded = load_official_from_dir(stress_checkpoint_dir)
    assert_same_weights(loaded, stress_net)


def test_the_same_weights_give_the_same_bytes(stress_net, stress_checkpoint_dir, tmp_path):
    """DVC hashes the checkpoint: writing it again must not change it (safetensors alone orders
    its header differently on every write)."""
    again = tmp_path / "again"
    write_hub_layout(again, stress_net)
    assert sha256_file(again / "model.safetensors") == sha256_file(stress_checkpoint_dir / "model.safetensors")
    loaded = load_official_from_dir(again)
    assert_same_weights(loaded, stress_net)


def _copy(src, dst, edit=None):
    shutil.copytree(src, dst)
    if edit:
        state = load_file(dst / "model.safetensors")
        edit(state)
        save_file(state, dst / "model.safetensors")
    return dst


AUX_NORM = "model.head.scratch.output_conv2_aux.{}.2.{}"  # one LayerNorm, tied across 4 aux levels


def _save_every_name(stress_net, directory, edit=None):
    """A checkpoint saved the way fine-tuners do: save_file of a cloned state_dict, aliases included."""
    from da3_litert_farm.model.official import HubLayout

    directory.mkdir()
    state = {k: v.detach().clone().contiguous() for k, v in HubLayout(stress_net).state_dict().items()}
    if edit:
        edit(state)
    save_file(state, directory / "model.safetensors")
    (directory / "config.json").write_text(json.dumps({"model_name": "da3-small"}))
    return directory


def test_tied_aliases_with_equal_values_load(stress_net, tmp_path):
    directory = _save_every_name(stress_net, tmp_path / "c")
    assert AUX_NORM.format(3, "weight") in load_file(directory / "model.safetensors")
    loaded = load_official_from_dir(directory)
    assert_same_weights(loaded, stress_net)


def test_tied_aliases_with_different_values_name_both_keys(stress_net, tmp_path):
    def drift(state):
        state[AUX_NORM.format(2, "bias")] = state[AUX_NORM.format(2, "bias")] + 1e-3

    directory = _save_every_name(stress_net, tmp_path / "c", drift)
    with pytest.raises(CheckpointError) as err:
        load_official_from_dir(directory)
    assert f"{AUX_NORM.format(2, 'bias')} and {AUX_NORM.format(0, 'bias')} are one tensor" in str(err.value)


def test_missing_key_is_listed(stress_checkpoint_dir, tmp_path):
    bad = _copy(stress_checkpoint_dir, tmp_path / "c", lambda s: s.pop("model.head.norm.weight"))
    with pytest.raises(CheckpointError, match=r"missing keys \(1\): \['model.head.norm.weight'\]"):
        load_official_from_dir(bad)


def test_unexpected_key_is_listed(stress_checkpoint_dir, tmp_path):
    bad = _copy(stress_checkpoint_dir, tmp_path / "c",
                lambda s: s.update({"model.head.extra": torch.zeros(1)}))
    with pytest.raises(CheckpointError, match=r"unexpected keys \(1\): \['model.head.extra'\]"):
        load_official_from_dir(bad)


def test_wrong_shape_is_an_error(stress_checkpoint_dir, tmp_path):
    bad = _copy(stress_checkpoint_dir, tmp_path / "c",
                lambda s: s.update({"model.head.norm.weight": torch.zeros(3)}))
    with pytest.raises(CheckpointError, match="head.norm.weight"):
        load_official_from_dir(bad)


def test_unprefixed_keys_get_a_hint(stress_checkpoint_dir, tmp_path):
    def strip(state):
        for k in list(state):
            state[k[len("model."):]] = state.pop(k)

    bad = _copy(stress_checkpoint_dir, tmp_path / "c", strip)
    with pytest.raises(CheckpointError, match="prefix every key with 'model.'"):
        load_official_from_dir(bad)


def test_config_must_name_a_supported_model(stress_checkpoint_dir, tmp_path):
    bad = _copy(stress_checkpoint_dir, tmp_path / "c")
    (bad / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match='no "model_name"'):
        load_official_from_dir(bad)
    (bad / "config.json").write_text(json.dumps({"model_name": "da3-giant"}))
    with pytest.raises(CheckpointError, match=r"model_name: preset 'da3-giant' is not one the farm converts \(ViT-G.*\); supported: da3-small, da3-base, da3-large, "):
        load_official_from_dir(bad)


def test_corrupt_weights(stress_checkpoint_dir, tmp_path):
    bad = _copy(stress_checkpoint_dir, tmp_path / "c")
    (bad / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_official_from_dir(bad)


def _hub_cache(tmp_path, stress_checkpoint_dir):
    """A Hugging Face cache holding depth-anything/DA3-SMALL at COMMIT, as `hf download` leaves it."""
    repo_dir = tmp_path / "hub" / "models--depth-anything--DA3-SMALL"
    shutil.copytree(stress_checkpoint_dir, repo_dir / "snapshots" / COMMIT)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(COMMIT)
    return tmp_path / "hub"


def test_hub_source_reads_the_cache_without_network(stress_checkpoint_dir, tmp_path, monkeypatch):
    cache = _hub_cache(tmp_path, stress_checkpoint_dir)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # any network use would fail
    snapshot, commit = fetch_from_hub("depth-anything/DA3-SMALL", "main", cache_dir=cache)
    assert commit == COMMIT
    assert snapshot == cache / "models--depth-anything--DA3-SMALL" / "snapshots" / COMMIT
    assert fetch_from_hub("depth-anything/DA3-SMALL", COMMIT, cache_dir=cache)[1] == COMMIT


def test_hub_source_offline_fails_fast_with_help(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    started = time.time()
    with pytest.raises(CheckpointError) as err:
        fetch_from_hub("depth-anything/DA3-SMALL", "main", cache_dir=tmp_path / "empty", key="models.small")
    assert time.time() - started < 10  # no minute of retries (a functional bound, not a benchmark)
    text = str(err.value)
    assert "hf download depth-anything/DA3-SMALL" in text
    assert "models.small.source: local" in text and "models.small.source: random" in text


def test_hub_offline_mode_is_respected(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(CheckpointError, match="HF_HUB_OFFLINE is set"):
        fetch_from_hub("depth-anything/DA3-SMALL", "main", cache_dir=tmp_path / "empty")


def test_build_checkpoint_local_records_provenance(stress_checkpoint_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    params = CheckpointParams("local", "da3-small", "depth-anything/DA3-SMALL", "main", str(stress_checkpoint_dir), 0)
    provenance = build_checkpoint(params, out)
    assert provenance["source"] == "local"
    assert provenance["model_name"] == "da3-small"
    assert provenance["weights_sha256"] == sha256_file(stress_checkpoint_dir / "model.safetensors")
    assert sha256_file(out / "model.safetensors") == provenance["weights_sha256"]


def test_stress_weights_are_seeded_and_span_a_decade(stress_net):
    from da3_litert_farm.model.official import official_depth
    from da3_litert_farm.model.photo_input import load_photo_tensor
    from da3_litert_farm.model.stress import stress_model

    again = stress_model(seed=0)
    other = stress_model(seed=1)
    a, b = stress_net.state_dict(), again.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["backbone.pretrained.pos_embed"], other.state_dict()["backbone.pretrained.pos_embed"])
    gammas = a["backbone.pretrained.blocks.3.ls1.gamma"]
    assert gammas.std() > 0.05  # per-channel, not the constant a default init gives
    depth = official_depth(stress_net, load_photo_tensor("astronaut", 126, 224))
    lo, hi = torch.quantile(depth.flatten(), torch.tensor([0.01, 0.99]))
    assert 3 < float(hi / lo) < 30  # about a decade on a photo other than the calibration one
