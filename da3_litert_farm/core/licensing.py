"""Under which licences a shipped file may be used, whether that allows commercial use, and whom an app credits.

The catalog records it once per version (`license`); every sidecar copies it, so an app's
assets say it too. Standard library only: the light client reads it.
"""

from __future__ import annotations

CODE_LICENSE = "Apache-2.0"  # the farm's own code: LICENSE at the repository's root

# Where the farm read each Hub checkpoint's weights licence: the "Model Cards" table of the official Depth
# Anything 3 README, at this commit, which links each checkpoint's model card. The table writes "Apache 2.0"
# and "CC BY-NC 4.0"; recorded here as their SPDX ids.
DA3_MODEL_TABLE = ("https://github.com/ByteDance-Seed/Depth-Anything-3/blob/"
                   "135dc15b0e04017ec4488d02cac6033c7dd4d267/README.md")
DA3_AUTHOR = "ByteDance-Seed"

# The Hub checkpoint of every preset the farm converts (core.models.PRESETS) and its weights licence. A shipped
# .tflite is a format conversion of the weights, so it carries their licence. (DA3-LARGE, the da3-large preset's repo
# in core.models, is a checkpoint the table marks deprecated; its DA3-LARGE-1.1 has the same licence.)
HUB_WEIGHTS = {
    "depth-anything/DA3-SMALL": "Apache-2.0",
    "depth-anything/DA3-BASE": "Apache-2.0",
    "depth-anything/DA3-LARGE": "CC-BY-NC-4.0",
    "depth-anything/DA3MONO-LARGE": "Apache-2.0",
    "depth-anything/DA3METRIC-LARGE": "Apache-2.0",
}
# Whether a weights licence allows commercial use: CC BY-NC's "NC" is non-commercial.
COMMERCIAL = {"Apache-2.0": "yes", "CC-BY-NC-4.0": "no"}
UNKNOWN = "unknown"  # commercial_use of weights whose licence the farm has not recorded
NOT_RECORDED = "not recorded by the farm: check the checkpoint's own licence before shipping"


def model_card(repo: str) -> str:
    return f"https://huggingface.co/{repo}"


def commercial_use(weights: str) -> str:
    """'yes', 'no' or 'unknown': whether weights under this licence may ship in a commercial app."""
    return COMMERCIAL.get(weights, UNKNOWN)


def license_entry(checkpoint: dict) -> dict:
    """The catalog's `license` object for a checkpoint provenance (model/checkpoint.py writes it)."""
    source, repo = checkpoint["source"], checkpoint.get("repo")
    if source == "random":
        return {"code": CODE_LICENSE, "weights": "none: stress weights (seeded random init, not a trained model)",
                "weights_source": f"random, seed {checkpoint.get('seed')}", "attribution": None,
                "commercial_use": UNKNOWN, "license_source": None}
    if source == "hub" and repo in HUB_WEIGHTS:
        weights = HUB_WEIGHTS[repo]
        return {"code": CODE_LICENSE, "weights": weights,
                "weights_source": f"{repo} ({DA3_AUTHOR}, Hugging Face Hub)",
                "attribution": f"Depth Anything 3 ({repo.split('/')[1]}) by {DA3_AUTHOR}, {weights}; "
                               f"converted to LiteRT by da3-litert-farm ({CODE_LICENSE})",
                "commercial_use": commercial_use(weights),
                "license_source": f"{model_card(repo)}, as the Model Cards table of {DA3_MODEL_TABLE} states"}
    where = repo if source == "hub" else checkpoint.get("path")
    return {"code": CODE_LICENSE, "weights": NOT_RECORDED, "weights_source": f"{source}: {where}",
            "attribution": None, "commercial_use": UNKNOWN, "license_source": None}


def catalog_license(catalog: dict, model: str) -> dict:
    """The license a published catalog records for `model`'s weights (sources.<model>.license); a source
    without one says it was not recorded, never a licence the farm did not read. A catalog made before the farm
    recorded commercial use gets it from its weights licence."""
    recorded = catalog["sources"][model].get("license") or {"code": CODE_LICENSE, "weights": NOT_RECORDED,
                                                            "weights_source": None, "attribution": None}
    return {"commercial_use": commercial_use(recorded["weights"]), **recorded}
