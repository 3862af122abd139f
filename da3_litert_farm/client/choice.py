"""Which file an app gets: the cell a camera (or a name) picks among one model's files, at a resolution tier or
within a GMAC budget, or the bundle of a model at a tier; each with the reason line that `select` and `pull`
print. The ratio rules are core.aspects' (closest_aspect, within_tier)."""

from __future__ import annotations

from da3_litert_farm.client.catalog import PullError
from da3_litert_farm.client.show import check_catalog
from da3_litert_farm.core.aspects import Aspect, Shape, closest_aspect, within_tier


def choose(catalog: dict, aspect: str | None, camera: tuple[int, int] | None, long_side: int | None = None,
           max_gmac: float | None = None, model: str | None = None) -> tuple[dict, str]:
    """The catalog entry to ship, and why: among the files of one model (`model`; by default the catalog's only
    one), the named cell or aspect, or for a camera the closest ratio among the files of a tier
    (core.aspects.within_tier: a long side, or a GMAC budget; the largest of each ratio by default)."""
    check_catalog(catalog)
    if aspect is not None:
        if max_gmac is not None:
            raise PullError("--max-gmac chooses among the files a --camera fits; --aspect names one (--long-side "
                            "names its tier)")
        return _named(catalog, aspect, long_side, model)
    model = pick_model(catalog, model)
    models = {m["cell"]: m for m in catalog["models"] if m["model"] == model}
    gmac = {cell: m["gpu_lint"]["gmac"] for cell, m in models.items() if "gmac" in m.get("gpu_lint", {})}
    aspects, tier = within_tier(catalog_aspects(catalog, model), long_side, max_gmac, gmac)
    best, why = closest_aspect(aspects, *camera)
    note = orientation_note(aspects, camera)
    cost = f", {gmac[best.name]:g} GMAC per inference" if best.name in gmac else ""
    which = f"model {model}; " if len(held_models(catalog)) > 1 else ""
    return models[best.name], which + (f"{tier}; " if tier else "") + why + cost + (f"\n{note}" if note else "")


def _named(catalog: dict, name: str, long_side: int | None, model: str | None) -> tuple[dict, str]:
    """The entry `--aspect NAME` names: a cell, or an aspect of the model at one tier."""
    version = catalog["version"]
    cells = {m["cell"]: m for m in catalog["models"]}
    if name in cells:  # a cell names its model and tier: --model and --long-side may only agree
        entry = cells[name]
        if model is not None and model != entry["model"]:
            raise PullError(f"cell {name} is of model {entry['model']}, not --model {model}")
        if long_side is not None and long_side != entry["tier"]:
            raise PullError(f"cell {name} is of long side {entry['tier']}, not --long-side {long_side}")
        return entry, f"cell {name} requested"
    model = pick_model(catalog, model)
    entries = [m for m in catalog["models"] if m["model"] == model]
    named = [m for m in entries if m["aspect"] == name]
    if not named:
        raise PullError(f"aspect {name!r} is not in catalog {version}; available: "
                        f"{sorted({m['aspect'] for m in entries})} (the aspects of model {model}; a cell name such "
                        f"as {entries[0]['cell']} works too)")
    if long_side is not None:
        tiers = sorted({m["tier"] for m in named})
        named = [m for m in named if m["tier"] == long_side]
        if not named:
            raise PullError(f"aspect {name} of model {model} is not at long side {long_side} in catalog {version}: "
                            f"its long sides are {', '.join(map(str, tiers))}")
    if len(named) > 1:
        raise PullError(f"aspect {name} of model {model} is at {len(named)} long sides in catalog {version}: "
                        f"{', '.join(m['cell'] for m in named)}; choose one with --long-side, or name the cell")
    return named[0], f"aspect {name} requested: {named[0]['cell']}"


def held_models(catalog: dict) -> list[str]:
    """The models the catalog holds files of, in its order."""
    with_files = {m["model"] for m in catalog["models"]}
    return [name for name in catalog["sources"] if name in with_files]


def pick_model(catalog: dict, model: str | None) -> str:
    """`model`, if the catalog holds it; by default the catalog's only model. Refusals name what it holds."""
    held = held_models(catalog)
    if model is None and len(held) == 1:
        return held[0]
    if model in held:
        return model
    listed = f"model{'s' if len(held) > 1 else ''} {', '.join(_described(catalog, name) for name in held)}"
    if model is None:
        raise PullError(f"catalog {catalog['version']} holds {listed}: choose one with --model")
    raise PullError(f"model {model!r} is not in catalog {catalog['version']}; it holds {listed}")


def _described(catalog: dict, model: str) -> str:
    """A model's name and what its files output (e.g. small (relative depth))."""
    output = next(m.get("output") or {} for m in catalog["models"] if m["model"] == model)
    kind = output.get("kind") or output.get("meaning")
    return f"{model} ({kind})" if isinstance(kind, str) else model


def catalog_aspects(catalog: dict, model: str | None = None) -> list[Aspect]:
    """The files of `model` (else every file) as core.aspects chooses among them, named by cell, so that a
    reason names the file."""
    return [Aspect(m["cell"], m["ratio"], Shape(m["height"], m["width"])) for m in catalog["models"]
            if model in (None, m["model"])]


def choose_bundle(catalog: dict, model: str | None = None, long_side: int | None = None) -> tuple[dict, str]:
    """The bundle of one model (by default the catalog's only one) at one tier (by default its only one)."""
    check_catalog(catalog)
    version = catalog["version"]
    if not catalog.get("bundles"):
        raise PullError(f"catalog {version} has no bundle; pull one aspect")
    model = pick_model(catalog, model)
    bundles = [b for b in catalog["bundles"] if b["model"] == model]
    tiers = ", ".join(str(b["tier"]) for b in sorted(bundles, key=lambda b: -b["tier"]))
    if not bundles:
        raise PullError(f"catalog {version} has no bundle of model {model}; pull one aspect")
    if long_side is not None:
        bundles = [b for b in bundles if b["tier"] == long_side]
        if not bundles:
            raise PullError(f"model {model} has no bundle of long side {long_side} in catalog {version}: its "
                            f"bundles' long sides are {tiers}")
    if len(bundles) > 1:
        raise PullError(f"model {model} has a bundle per long side in catalog {version} ({tiers}): choose one "
                        f"with --long-side")
    bundle = bundles[0]
    return bundle, f"bundle {bundle['bundle']} of {', '.join(s['signature'] for s in bundle['signatures'])}"


def find_bundle(catalog: dict, name: str | None = None) -> dict:
    """Bundle `name` (MODEL-TIER); None: the catalog's only bundle."""
    bundles = {b["bundle"]: b for b in catalog.get("bundles", [])}
    if name is None and len(bundles) == 1:
        return next(iter(bundles.values()))
    if name in bundles:
        return bundles[name]
    held = f"its bundles: {', '.join(bundles) or 'none'}"
    if name is None:
        raise PullError(f"catalog {catalog['version']} holds {len(bundles)} bundles, not one: name one ({held})")
    raise PullError(f"catalog {catalog['version']} has no bundle {name}; {held}")


def bundle_of(catalog: dict, entry: dict) -> dict | None:
    """The bundle that holds the entry's cell as a signature, if any."""
    return next((b for b in catalog.get("bundles", []) if any(s["cell"] == entry["cell"] for s in b["signatures"])),
                None)


def orientation_note(aspects: list[Aspect], camera: tuple[int, int]) -> str | None:
    """Where the rotated frame would get another model: say both, so a sensor size passed
    unrotated (4032x3024 for a portrait app) is caught in the build log."""
    width, height = camera
    pick, _ = closest_aspect(aspects, width, height)
    rotated, _ = closest_aspect(aspects, height, width)
    if pick.name == rotated.name:
        return None
    this, other = ("landscape", "portrait") if width > height else ("portrait", "landscape")
    return (f"orientation: --camera is the frame as fed to the model, after rotation. {width}x{height} ({this}) "
            f"gets {pick.name} (HxW {pick.shape}); if your app feeds the frame {other}, pass {height}x{width}: "
            f"it gets {rotated.name} (HxW {rotated.shape})")
