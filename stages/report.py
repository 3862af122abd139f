"""`report` stage: artifacts/report/index.html with its images, and the summary DVC metrics and plots read.

    python -m stages.report
"""

from __future__ import annotations

import sys

from da3_litert_farm.config import stage
from da3_litert_farm.core import fileio, paths
from da3_litert_farm.report.report import build, plot_rows, read_json


def report(run: stage.Run) -> None:
    catalog = read_json(paths.CATALOG)
    # The images replace the old ones whole, then the page; a failure leaves the last report.
    with fileio.atomic_dir(paths.REPORT_IMAGES) as images:
        text, figures = build(catalog, images)
    fileio.write_bytes(paths.REPORT_PAGE, text.encode())
    with fileio.atomic_dir(paths.SUMMARY) as folder:  # holds exactly the catalogued cells
        for cell, row in figures.items():
            fileio.write_json(folder / paths.summary(cell).name, row)
    fileio.write_json(paths.PLOTS, plot_rows(figures))
    print(f"report: {len(figures)} cells -> {paths.REPORT_PAGE} ({run.seconds():.1f} s)")


def main(argv: list[str] | None = None) -> int:
    return stage.run("report", __doc__, report, params=False, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
