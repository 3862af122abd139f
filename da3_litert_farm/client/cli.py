"""`farm`: fetch the right model for an app build from a published catalog version.

  farm versions --repo R
  farm show     --repo R --version V [--json] [--trust KEY.pub]
  farm select   --repo R --version V [--model M] (--aspect NAME | --camera WxH) [--long-side N | --max-gmac G]
                [--soc SOC] [--trust KEY.pub]
  farm pull     --repo R --version V [--model M] (--aspect NAME | --camera WxH | --bundle)
                [--long-side N | --max-gmac G] [--soc SOC | --ai-pack] --out DIR
                (--trust KEY.pub | --allow-unsigned) [--allow-stress]
  farm verify   DIR --trust KEY.pub
  farm diff     --repo R A B

R is the farm's git repository (a path or a git URL); V a published catalog version
(git tag catalog/vV). `pull` downloads the model through DVC from the remote committed in
the repository at that tag, checks its sha256 against that version's catalog, and only then
writes the .tflite (<catalog name>-<cell>-<H>x<W>-fp16.tflite; a bundle:
<catalog name>-<bundle>-bundle-fp16.tflite) and a JSON sidecar (its cell, model and tier,
input shape, layout, preprocessing, output meaning, the model's sha256, its weights' licence)
into DIR. It stages in a hidden folder inside DIR (so a build step that
may write only its declared output folder works); any failure removes that folder and
leaves DIR as it was (a DIR that did not exist is not left behind). The old sidecar goes
aside first and the new one comes last, so a sidecar always describes the model beside it. A pull
killed outright (SIGKILL, a power cut) can leave its staging folder, or a model whose sidecar is
still aside: the next pull into DIR puts back the sidecar that matches the model, removes the
staging folder, then pulls (docs/reliability.md). A pull checks the free space first and names a
full disk as such.

Trust: `pull` first verifies the version's signature (committed at its tag by `make publish`) against the
publisher keys the app pins: --trust KEY.pub (repeatable) or --trust-config FILE (keys with retirement rules),
else the environment: FARM_TRUST (key paths joined by the OS path separator) and FARM_TRUST_CONFIG. It refuses,
writing nothing, an unsigned release, a key it does not trust, a retired key, and a signature that does not
cover the catalog; --allow-unsigned takes a release unverified, and its sidecar says so. A verified pull also
writes the release folder (<name>-<version>.release/: catalog.json, provenance.json, signature.sig) into DIR,
which lets `farm verify DIR --trust KEY.pub` re-check the files and sidecars there offline. `show` and `select`
verify when given a key. Verifying needs the verify extra: pip install "da3-litert-farm[verify]".

Remotes: a local folder needs nothing more; S3 needs `pip install "da3-litert-farm[s3]"` and
credentials from the usual places (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE,
~/.aws); SSH needs `pip install "da3-litert-farm[ssh]"` and a key in ~/.ssh or an SSH agent.
Nothing the client writes holds a credential.

Choosing a model (--model NAME): a catalog may hold several models (params.yaml's `models`,
e.g. small for relative depth and metric for metric depth), each at several resolution tiers
(long sides, e.g. 896 and 518) and aspects; each file is a cell, named MODEL-TIER-ASPECT
(small-896-9x16). `select` and `pull` choose among the files of one model: --model may be left
out when the catalog holds one, and is required when it holds several (the refusal names them
and their output). --aspect takes a cell name (small-896-9x16) or an aspect name (9x16); an
aspect the model holds at several tiers needs --long-side N to name the tier.

Choosing by camera (--camera WxH): W x H is the frame as it is fed to the model, after
rotation. A phone sensor reports landscape sizes (4032x3024); a portrait app rotates the
frame and must pass 3024x4032. The pick is the model's file whose width/height ratio is
closest to the frame's, in log space (so 9:16 and 16:9 are equally far from 1:1): the model
that crops the least. Ties go to the model with more pixels, then to the cell name. The
choice and its ratio error are printed and, where the catalog holds the other orientation
too, what the rotated frame would get. Among the model's tiers, --long-side N first keeps
the files of that long side, --max-gmac G those that cost at most G GMAC per inference (a
latency budget), and the camera then picks among them; without either, among the largest file
of each ratio (da3_litert_farm.core.aspects.within_tier).

Phone NPUs (--soc SOC): where the farm compiled a cell for Qualcomm NPUs (params.yaml's npu.targets), --soc
SM8650 picks that chip's file of the chosen cell instead of the GPU file (named ...-qualcomm-sm8650.tflite); its
sidecar says which runtime libraries the app needs and which GPU file to fall back on. A chip the catalog has no file
for gets the GPU file, and the reason line says so. `pull --ai-pack` writes, into --out, a Play AI pack of the chosen
cell: every phone chip's file in its device group, the GPU file for every other device, and the device targeting
configuration (docs/app-integration.md).

`pull --bundle` writes a bundle instead: one per model and tier (named MODEL-TIER, e.g.
small-896), one .tflite holding every aspect of that tier, a signature per aspect (signature
key = aspect name), the weights stored once. --model and --long-side N name it; --long-side
may be left out when the model has one tier, and --max-gmac does not apply. Its sidecar lists
each signature's cell, input shape and preprocessing. The app picks the signature at run time
the way `select` picks a model (da3_litert_farm.core.aspects.closest_aspect), and `select`
names it.

A catalog with any model built from stress weights (a dry run of the farm: it computes noise) is
flagged STRESS WEIGHTS by `show`, `select` and every sidecar, and `pull` refuses it unless
given --allow-stress.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from da3_litert_farm.client import npu_files
from da3_litert_farm.client.catalog import PullError, trusted_catalog
from da3_litert_farm.client.choice import bundle_of, choose
from da3_litert_farm.client.diff import diff, format_diff
from da3_litert_farm.client.pull import pull, pull_ai_pack
from da3_litert_farm.client.show import format_summary, summary
from da3_litert_farm.client.trust import load_trust, signature_line
from da3_litert_farm.client.verify import verify_assets
from da3_litert_farm.core.errors import FarmError
from da3_litert_farm.core.releases import published_versions, stress_warning


def positive(kind):
    """An argparse type: a number of `kind` above 0."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r} must be a finite number above 0")
        return value
    return parse


def parse_camera(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"camera size {text!r} is not WIDTHxHEIGHT, e.g. 1080x1920") from None
    if width <= 0 or height <= 0:
        raise argparse.ArgumentTypeError(f"camera size {text!r} must be positive")
    return width, height


# `farm --help` is this module's docstring: its first paragraph the description, the rest the epilog.
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="farm", description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, pick=True):
        p.add_argument("--repo", required=True, help="the farm's git repository: a path or a git URL")
        if pick:
            p.add_argument("--version", required=True, help="published catalog version, e.g. 0.1.0")
            p.add_argument("--model", metavar="NAME",
                           help="the catalog's model to choose from, e.g. small; needed where it holds several")
            which = p.add_mutually_exclusive_group(required=True)
            which.add_argument("--aspect", metavar="NAME",
                               help="a cell name (e.g. small-896-9x16) or an aspect name of the model (e.g. 9x16)")
            which.add_argument("--camera", type=parse_camera, metavar="WxH",
                               help="the frame as it is fed to the model, after rotation, in pixels: 1080x1920 for "
                                    "a portrait app (a sensor reports 1920x1080); picks the closest ratio")
            tier = p.add_mutually_exclusive_group()
            tier.add_argument("--long-side", type=positive(int), metavar="N",
                              help="the resolution tier: with --camera, choose among the files of this long side; "
                                   "with --aspect NAME, that aspect at this tier; with --bundle, this tier's bundle")
            tier.add_argument("--max-gmac", type=positive(float), metavar="G",
                              help="with --camera: choose among the files that cost at most G billion "
                                   "multiply-accumulates per inference (the closest ratio; ties to the larger)")
            p.add_argument("--soc", metavar="SOC", help="the phone's Qualcomm chip, e.g. SM8650: the chosen cell's file "
                                                        "compiled for its NPU (a chip without one: the GPU file)")
            return which

    def trusting(p, unsigned=True):
        p.add_argument("--trust", action="append", metavar="KEY.pub", default=[],
                       help="a publisher's public key (PEM) to verify the release's signature with; repeatable. "
                            "Default: the paths in FARM_TRUST")
        p.add_argument("--trust-config", action="append", metavar="FILE", default=[],
                       help='JSON {"keys": [{"path": ..., "retired_from_version": ..., "not_after": ...}]}: trusted '
                            "keys with retirement rules. Default: FARM_TRUST_CONFIG")
        if unsigned:
            p.add_argument("--allow-unsigned", action="store_true",
                           help="take a release whose signature is absent, or not checked for want of a key "
                                "(the sidecar says not verified)")

    common(sub.add_parser("versions", help="list published catalog versions"), pick=False)
    p = sub.add_parser("show", help="a version's models: shapes, sizes, sha256, CPU and GPU fidelity, weights, tools")
    common(p, pick=False)
    p.add_argument("--version", required=True, help="published catalog version, e.g. 0.1.0")
    p.add_argument("--json", action="store_true")
    trusting(p)
    p = sub.add_parser("select", help="print which model a camera or aspect gets")
    common(p)
    trusting(p)
    p = sub.add_parser("pull", help="verify the release's signature, download a model (or the bundle), check its "
                                    "sha256, write it with its sidecar")
    common(p).add_argument("--bundle", action="store_true",
                           help="the bundle of the model at one tier: every aspect in one file, a signature "
                                "per aspect")
    p.add_argument("--ai-pack", action="store_true",
                   help="write a Play AI pack of the chosen cell into --out: each compiled phone chip's NPU file in "
                        "its device group, the GPU file for every other device, device_targeting_configuration.xml")
    p.add_argument("--out", required=True, type=Path, help="target directory (created if missing)")
    p.add_argument("--remote", help="DVC remote name to download from (default: the repository's default)")
    p.add_argument("--allow-stress", action="store_true",
                   help="pull a catalog built from stress weights (noise; for dry runs of an app's plumbing)")
    trusting(p)
    p = sub.add_parser("verify", help="offline: the .tflite files and sidecars in DIR against the signed release "
                                      "folders that `pull --trust` wrote there")
    p.add_argument("dir", type=Path, metavar="DIR")
    trusting(p, unsigned=False)
    p = sub.add_parser("diff", help="what changed between two catalog versions")
    common(p, pick=False)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--json", action="store_true")
    return parser


def _warn(warning: str | None) -> None:
    if warning:
        print(f"WARNING: {warning}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "versions":
            print("\n".join(published_versions(args.repo)) or "no published versions")
        elif args.command == "show":
            catalog, signature, _ = trusted_catalog(args.repo, args.version, load_trust(args.trust, args.trust_config),
                                                    args.allow_unsigned, required=False)
            shown = summary(catalog)
            if args.json:
                print(json.dumps({**shown, "signature": signature}, indent=2))
            else:
                print(f"{format_summary(shown)}\n{signature_line(signature)}")
        elif args.command == "select":
            catalog, signature, _ = trusted_catalog(args.repo, args.version, load_trust(args.trust, args.trust_config),
                                                    args.allow_unsigned, required=False)
            entry, reason = choose(catalog, args.aspect, args.camera, args.long_side, args.max_gmac, args.model)
            target, why = npu_files.for_chip(entry, args.soc) if args.soc else (None, None)
            shown = npu_files.as_file(entry, target) if target else entry
            print(f"{reason}\n{why + chr(10) if why else ''}{entry['cell']}: {shown['file']} sha256 {shown['sha256']}")
            bundle = bundle_of(catalog, entry)
            if bundle:
                print(f"in the bundle {bundle['bundle']}: signature {entry['aspect']!r} of {bundle['file']} "
                      f"(farm pull --bundle --model {bundle['model']} --long-side {bundle['tier']})")
            print(signature_line(signature))
            _warn(stress_warning(catalog))
        elif args.command == "pull":
            if args.ai_pack:
                if args.bundle or args.soc:
                    raise PullError("--ai-pack holds the chosen cell's file for every compiled chip and the GPU file: "
                                    "name the cell with --camera or --aspect, without --bundle or --soc")
                print(pull_ai_pack(args.repo, args.version, args.out, args.aspect, args.camera, args.remote,
                                   args.allow_stress, load_trust(args.trust, args.trust_config), args.allow_unsigned,
                                   args.long_side, args.max_gmac, args.model))
                return 0
            path, reason = pull(args.repo, args.version, args.out, args.aspect, args.camera, args.remote,
                                args.bundle, args.allow_stress, load_trust(args.trust, args.trust_config),
                                args.allow_unsigned, args.long_side, args.max_gmac, args.model, args.soc)
            document = json.loads(Path(f"{path}.json").read_text())
            print(f"{reason}\nwrote {path} (sha256 verified) and {path.name}.json")
            print(signature_line(document["signature"]))
            _warn(document.get("warning"))
        elif args.command == "verify":
            print(verify_assets(args.dir, load_trust(args.trust, args.trust_config)))
        elif args.command == "diff":
            rows = diff(args.repo, args.old, args.new)
            print(json.dumps(rows, indent=2) if args.json else format_diff(rows, args.old, args.new))
    except (FarmError, OSError) as exc:  # PullError, TrustError, GitError, CatalogError
        print(f"farm {args.command}: {exc}", file=sys.stderr)
        return 1
    finally:
        _remove_dvc_clones()
    return 0


def _remove_dvc_clones() -> None:
    """DVC's API clones the farm's repository into the temp folder for each read and, unlike its command line,
    leaves the clones there (about 2 MB a command); an app build that runs farm often would fill TMPDIR."""
    if "dvc.repo.open_repo" in sys.modules:
        sys.modules["dvc.repo.open_repo"].clean_repos()


if __name__ == "__main__":
    sys.exit(main())
