"""Under which licences a shipped file may be used, and whom an app credits.

The catalog records it once per version (`license`); every sidecar copies it, so an app's
assets say it too. Standard library only: the light client reads it.
"""

from __future__ import annotations

CODE_LICENSE = "Apache-2.0"  # the farm's own code: LICENSE at the repository's root

# The Hub checkpoints whose licence this project has read on their model cards. A shipped
# .tflite is a format conversion of the weights, so it carries their licence.
HUB_WEIGHTS = {
    "depth-anything/DA3-SMALL": {
        "weights": "Apache-2.0",
        "author": "ByteDance-Seed",
        "attribution": "Depth Anything 3 (DA3-SMALL) by ByteDance-Seed, Apache-2.0; "
                       "converted to LiteRT by da3-litert-farm (Apache-2.0)",
    },
}
NOT_RECORDED = "not recorded by the farm: check the checkpoint's own licence before shipping"


def license_entry(checkpoint: dict) -> dict:
    """The catalog's `license` object for a checkpoint provenance (model/checkpoint.py writes it)."""
    source = checkpoint["source"]
    if source == "random":
        return {"code": CODE_LICENSE, "weights": "none: stress weights (seeded random init, not a trained model)",
                "weights_source": f"random, seed {checkpoint.get('seed')}", "attribution": None}
    if source == "hub" and checkpoint.get("repo") in HUB_WEIGHTS:
        known = HUB_WEIGHTS[checkpoint["repo"]]
        return {"code": CODE_LICENSE, "weights": known["weights"],
                "weights_source": f"{checkpoint['repo']} ({known['author']}, Hugging Face Hub)",
                "attribution": known["attribution"]}
    where = checkpoint.get("repo") if source == "hub" else checkpoint.get("path")
    return {"code": CODE_LICENSE, "weights": NOT_RECORDED, "weights_source": f"{source}: {where}",
            "attribution": None}


def catalog_license(catalog: dict, model: str) -> dict:
    """The license a published catalog records for `model`'s weights (sources.<model>.license); a source
    without one says it was not recorded, never a licence the farm did not read."""
    return catalog["sources"][model].get("license") or {"code": CODE_LICENSE, "weights": NOT_RECORDED,
                                                        "weights_source": None, "attribution": None}
