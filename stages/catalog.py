"""`catalog` stage: artifacts/catalog.json, every cell's shipped file and every bundle, checked against its schema.

    python -m stages.catalog

First clears what models and tiers dropped from params.yaml left behind (da3_litert_farm.ops.prune).
"""

from __future__ import annotations

import sys

import jsonschema

from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.ops.catalog import CatalogError, build_catalog
from da3_litert_farm.ops.prune import prune_farm


def catalog(run: stage.Run) -> None:
    for message in prune_farm(run.params):
        print(f"catalog: {message}")
    try:
        document = build_catalog(run.params)
    except jsonschema.ValidationError as exc:  # its text quotes the whole schema; the path and reason suffice
        raise CatalogError(f"the catalog breaks its schema at {exc.json_path}: {exc.message}") from exc
    fileio.write_json(paths.CATALOG, document)
    print(f"catalog: {document['name']} {document['version']} with {len(document['models'])} files "
          f"({', '.join(m['cell'] for m in document['models'])}) and {len(document['bundles'])} bundles "
          f"({', '.join(b['bundle'] for b in document['bundles'])}) -> {paths.CATALOG}")


def main(argv: list[str] | None = None) -> int:
    return stage.run("catalog", __doc__, catalog, checkpoint_files=True, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
