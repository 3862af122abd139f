"""`catalog` stage: artifacts/catalog.json, every shipped model and the bundle, checked against its schema.

    python -m stages.catalog
"""

from __future__ import annotations

import argparse
import sys

import jsonschema

from da3_litert_farm.checks.shipped import NotShippableError
from da3_litert_farm.config.params import ParamsError, load_params
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.ops.catalog import CatalogError, build_catalog


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m stages.catalog", description=__doc__.splitlines()[0]).parse_args(argv)
    try:
        document = build_catalog(load_params())
    except (ParamsError, CatalogError, NotShippableError, jsonschema.ValidationError) as exc:
        print(f"catalog: {exc}", file=sys.stderr)
        return 1
    fileio.write_json(paths.CATALOG, document)
    print(f"catalog: {document['name']} {document['version']} with {len(document['models'])} models "
          f"({', '.join(m['aspect'] for m in document['models'])}) -> {paths.CATALOG}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
