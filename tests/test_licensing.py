"""The licence every shipped file carries: the farm's code, the weights it converts, whom to credit."""

import re
import tomllib
from pathlib import Path

import pytest

from da3_litert_farm.core.licensing import CODE_LICENSE, HUB_WEIGHTS, NOT_RECORDED, catalog_license, license_entry
from da3_litert_farm.core.models import PRESETS
from da3_litert_farm.ops.publish import PublishError, check_commercial

REPO = Path(__file__).parents[1]


def test_the_code_licence_is_the_one_the_repository_ships():
    assert (REPO / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == CODE_LICENSE == "Apache-2.0"


def test_the_official_small_checkpoint_is_apache_and_credits_bytedance_seed():
    entry = license_entry({"source": "hub", "repo": "depth-anything/DA3-SMALL", "revision": "main"})
    assert entry["weights"] == "Apache-2.0"
    assert "ByteDance-Seed" in entry["weights_source"] and "ByteDance-Seed" in entry["attribution"]
    assert entry["commercial_use"] == "yes"
    assert entry["license_source"].startswith("https://huggingface.co/depth-anything/DA3-SMALL, as the Model Cards "
                                              "table of https://github.com/ByteDance-Seed/Depth-Anything-3/blob/")


# What the Model Cards table of ByteDance-Seed/Depth-Anything-3's README (at 135dc15) says of each preset's weights,
# and the SPDX id of each licence it names.
UPSTREAM = {"da3-small": "Apache 2.0", "da3-base": "Apache 2.0", "da3-large": "CC BY-NC 4.0",
            "da3mono-large": "Apache 2.0", "da3metric-large": "Apache 2.0"}
SPDX = {"Apache 2.0": ("Apache-2.0", "yes"), "CC BY-NC 4.0": ("CC-BY-NC-4.0", "no")}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_records_its_upstream_licence_and_whether_it_allows_commercial_use(preset):
    repo = PRESETS[preset].repo
    entry = license_entry({"source": "hub", "repo": repo, "revision": "main"})
    assert (entry["weights"], entry["commercial_use"]) == SPDX[UPSTREAM[preset]]
    assert entry["license_source"].startswith(f"https://huggingface.co/{repo}, ")
    assert f"({repo.split('/')[1]}) by ByteDance-Seed, {entry['weights']}" in entry["attribution"]
    assert set(HUB_WEIGHTS) == {p.repo for p in PRESETS.values()}


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


def test_a_catalog_made_before_commercial_use_was_recorded_gets_it_from_its_weights_licence():
    old = {"code": "Apache-2.0", "weights": "CC-BY-NC-4.0", "weights_source": "x", "attribution": None}
    assert catalog_license({"sources": {"large": {"license": old}}}, "large") == {**old, "commercial_use": "no"}
    assert catalog_license({"sources": {"small": {"checkpoint": {}}}}, "small")["commercial_use"] == "unknown"


def hub_catalog(**repos) -> dict:
    return {"version": "0.3.0", "sources": {
        model: {"checkpoint": {"source": "hub", "repo": repo}, "license": license_entry({"source": "hub", "repo": repo})}
        for model, repo in repos.items()}}


def test_publish_refuses_non_commercial_weights_unless_allowed_naming_the_model_licence_and_flag():
    catalog = hub_catalog(small="depth-anything/DA3-SMALL", large="depth-anything/DA3-LARGE")
    with pytest.raises(PublishError, match="^" + re.escape(
            "catalog 0.3.0: the weights of models.large (depth-anything/DA3-LARGE) are CC-BY-NC-4.0, which does not "
            "allow commercial use: an app that ships them must be non-commercial. Convert a preset whose weights "
            "allow it (README.md, Licence), or publish anyway with --allow-noncommercial (make publish "
            "ARGS=--allow-noncommercial); the catalog, every pull sidecar and `farm show` then say commercial_use: "
            "no") + "$"):
        check_commercial(catalog, allow_noncommercial=False)
    check_commercial(catalog, allow_noncommercial=True)  # the publisher's explicit choice


def test_commercial_and_unrecorded_weights_publish_without_the_flag():
    check_commercial(hub_catalog(small="depth-anything/DA3-SMALL", metric="depth-anything/DA3METRIC-LARGE",
                                 tuned="someone/DA3-FINETUNE"), allow_noncommercial=False)


def test_the_readme_licence_table_is_what_the_farm_records():
    rows = re.findall(r"^\| `([\w-]+)` \| \[([\w-]+)\]\((\S+)\) \| ([\w.-]+) \| (yes|no)\b", (REPO / "README.md").read_text(),
                      re.M)
    assert sorted(preset for preset, *_ in rows) == sorted(PRESETS)
    for preset, name, card, weights, commercial in rows:
        entry = license_entry({"source": "hub", "repo": PRESETS[preset].repo})
        assert (PRESETS[preset].repo.split("/")[1], weights, commercial) == (name, entry["weights"],
                                                                            entry["commercial_use"])
        assert entry["license_source"].startswith(f"{card}, as the Model Cards table of ")
