"""A published catalog version, as the client reads it: from the farm's git tag through DVC, checked
(show.check_catalog), and verified against the keys the app trusts (trust.py) before a pull uses it.

PullError is the client's refusal: one line that says what to do, from any step of a pull.
"""

from __future__ import annotations

import json

from da3_litert_farm.client.remote import dvc_url, missing_plugin
from da3_litert_farm.client.show import CatalogError, check_catalog
from da3_litert_farm.client.trust import Release, Trust, check_release, read_release
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.git import GitError
from da3_litert_farm.core.releases import published_versions, stress_warning, tag_for


class PullError(FarmError, RuntimeError):
    pass


def _dvc_api():
    import dvc.api
    from dvc.exceptions import DvcException

    return dvc.api, DvcException


def read_catalog(repo: str, version: str) -> dict:
    """The catalog.json of a published version; unknown versions list the known ones."""
    try:
        known = published_versions(repo)
    except GitError as exc:
        raise PullError(f"cannot read the versions of {repo}: {exc}") from None
    if version not in known:
        hint = ("" if known else "; a farm publishes a version with `make publish` after `make farm` "
                "(docs/publishing.md), so a fresh clone of the farm has none until then")
        raise PullError(f"catalog version {version!r} is not published in {repo} (no tag {tag_for(version)}); "
                        f"published: {', '.join(known) or 'none'}{hint}")
    api, dvc_error = _dvc_api()
    try:
        text = api.read("artifacts/catalog.json", repo=dvc_url(repo), rev=tag_for(version))
    except (dvc_error, OSError, ValueError) as exc:
        reason = missing_plugin(str(exc), repo, tag_for(version)) or str(exc)
        raise PullError(f"cannot read the catalog of {version} from {repo}: {reason}") from None
    try:
        return check_catalog(json.loads(text))
    except (ValueError, RecursionError) as exc:  # CatalogError is a ValueError; RecursionError: nested too deep
        raise PullError(f"the catalog of {version} in {repo} is not one the client can use: "
                        f"{exc if isinstance(exc, CatalogError) else 'not JSON: ' + type(exc).__name__}") from None


def trusted_catalog(repo: str, version: str, trust: Trust | None, allow_unsigned: bool,
                    required: bool = True) -> tuple[dict, dict, Release | None]:
    """The catalog of a version, verified against the trusted keys: (catalog, what the sidecar records under
    "signature", the release). `required=False` (show, select): without a key, not verified and not refused."""
    catalog = read_catalog(repo, version)  # DVC's view of the tag: names an unknown version, a missing plugin
    trust = trust or Trust()
    if not trust and not required:
        return catalog, {"verified": False, "reason": "not checked: no --trust key given"}, None
    release = read_release(repo, version)
    signature = check_release(release, trust, allow_unsigned, version)
    try:
        signed_catalog = json.loads(release.catalog)
    except ValueError as exc:  # an unsigned release taken with --allow-unsigned: its bytes are anyone's
        raise PullError(f"the catalog of {version} at its tag is not JSON ({exc})") from None
    return check_catalog(signed_catalog), signature, release


def pullable_catalog(repo: str, version: str, trust: Trust | None, allow_unsigned: bool,
                     allow_stress: bool) -> tuple[dict, dict, Release | None]:
    """trusted_catalog, refused when built from stress weights unless `allow_stress`."""
    catalog, signature, release = trusted_catalog(repo, version, trust, allow_unsigned)
    if stress_warning(catalog) and not allow_stress:
        raise PullError(f"catalog {version} was built from stress weights: its models compute noise, not depth; "
                        f"nothing was downloaded. Pull a catalog built from a trained checkpoint, or pass "
                        f"--allow-stress for a dry run of the app's plumbing (the sidecar then says STRESS WEIGHTS)")
    return catalog, signature, release
