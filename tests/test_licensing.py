"""The licence every shipped file carries: the farm's code, the weights it converts, whom to credit."""

import tomllib
from pathlib import Path

from da3_litert_farm.core.licensing import CODE_LICENSE, NOT_RECORDED, catalog_license, license_entry

REPO = Path(__file__).parents[1]


def test_the_code_licence_is_the_one_the_repository_ships():
    assert (REPO / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == CODE_LICENSE == "Apache-2.0"


def test_the_official_small_checkpoint_is_apache_and_credits_bytedance_seed():
    entry = license_entry({"source": "hub", "repo": "depth-anything/DA3-SMALL", "revision": "main"})
    assert entry["weights"] == "Apache-2.0"
    assert "ByteDance-Seed" in entry["weights_source"] and "ByteDance-Seed" in entry["attribution"]


def test_stress_weights_have_no_weights_licence_and_nothing_to_credit():
    entry = license_entry({"source": "random", "seed": 3})
    assert entry["weights"].startswith("none: stress weights") and entry["weights_source"] == "random, seed 3"
    assert entry["attribution"] is None


def test_a_checkpoint_the_farm_has_no_record_of_is_not_given_a_licence():
    local = license_entry({"source": "local", "path": "checkpoints/mine"})
    other_hub = license_entry({"source": "hub", "repo": "someone/DA3-FINETUNE"})
    assert local["weights"] == other_hub["weights"] == NOT_RECORDED
    assert local["weights_source"] == "local: checkpoints/mine" and other_hub["weights_source"] == "hub: someone/DA3-FINETUNE"


def test_a_source_without_a_recorded_licence_says_so():
    catalog = {"sources": {"small": {"checkpoint": {"source": "hub"}}}}
    assert catalog_license(catalog, "small")["weights"] == NOT_RECORDED
