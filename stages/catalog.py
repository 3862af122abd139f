"""`catalog` stage: artifacts/catalog.json, every shipped model and the bundle, checked against its schema.

    python -m stages.catalog
"""

from __future__ import annotations

import sys

import jsonschema

from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.ops.catalog import CatalogError, build_catalog


def catalog(run: stage.Run) -> None:
    try:
        document = build_catalog(run.params)
    except jsonschema.ValidationError as exc:  # its text quotes the whole schema; the path and reason suffice
        raise CatalogError(f"the catalog breaks its schema at {exc.json_path}: {exc.message}") from exc
    fileio.write_json(paths.CATALOG, document)
    print(f"catalog: {document['name']} {document['version']} with {len(document['models'])} models "
          f"({', '.join(m['aspect'] for m in document['models'])}) -> {paths.CATALOG}")


def main(argv: list[str] | None = None) -> int:
    return stage.run("catalog", __doc__, catalog, checkpoint_files=True, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
