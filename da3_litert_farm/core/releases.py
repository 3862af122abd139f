"""What a published catalog version is: its git tags, their order, and whether it is shippable.

Shared by the farm (`publish`, `catalog`) and the light client (`farm`), so it imports only
the standard library and runs on Python >= 3.9.
"""

from __future__ import annotations

from da3_litert_farm.core.git import git

TAG_PREFIX = "catalog/v"
STRESS_WARNING = (
    "STRESS WEIGHTS: built from seeded random weights (models.<name>.source: random), not from a trained "
    "checkpoint. Its depth maps are noise; for dry runs of the farm and app plumbing only, never to ship"
)


def tag_for(version: str) -> str:
    return f"{TAG_PREFIX}{version}"


def model_tag(catalog: dict, aspect: str) -> str:
    """`<artifact>@v<version>`: the GTO convention that `dvc artifacts get NAME --rev v<version>` resolves."""
    return f"{artifact_name(catalog, aspect)}@v{catalog['version']}"


def artifact_name(catalog: dict, aspect: str) -> str:
    return f"{catalog['name']}-{aspect}"


def version_key(version: str) -> tuple:
    """Semantic-version precedence (semver.org, item 11): 1.0.0-rc.2 < 1.0.0-rc.10 < 1.0.0.

    A release sorts after its prereleases; prerelease identifiers compare one by one, numbers
    as numbers and below words, and a longer list wins when the shorter is its prefix."""
    core, _, pre = version.partition("-")
    identifiers = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in pre.split(".")) if pre else ()
    return (*(int(p) for p in core.split(".")), not pre, identifiers)


def published_versions(repo: str = ".") -> list[str]:
    """Catalog versions tagged in a repository (a path or a git URL), oldest first."""
    out = git("ls-remote", "--tags", "--refs", repo)
    tags = [line.split("refs/tags/", 1)[1] for line in out.splitlines() if "refs/tags/" in line]
    return sorted((t[len(TAG_PREFIX):] for t in tags if t.startswith(TAG_PREFIX)), key=version_key)


def stress_warning(catalog: dict) -> str | None:
    """The warning every view of a catalog carries when any of its models was built from stress weights, else
    None. Read from each model's checkpoint provenance (sources.<model>.checkpoint.source), not from the
    catalog's `warning`, so that a catalog which lost its warning is still recognised."""
    return STRESS_WARNING if any(s["checkpoint"]["source"] == "random" for s in catalog["sources"].values()) else None
