"""The outputs the docs show (a `farm select` reason, a sidecar, its recommended GPU mode, a metric sidecar's metres)
are what the client's code returns today, on a catalog the farm built from today's params.yaml
(da3_litert_farm/dev/doc_outputs.py): a drifted block, or a recorded catalog of other cells, fails here."""

from __future__ import annotations

import json

import pytest

from da3_litert_farm.dev import doc_outputs
from da3_litert_farm.dev.doc_outputs import OutputsError, RECORDED, load_recorded, planned_shapes, stale_cells, update
from da3_litert_farm.ops.catalog import validate_catalog
from tests.doc_blocks import REPO
from tests.test_docs import pages


def test_every_output_block_in_the_docs_is_what_the_code_prints_now():
    found, stale = update(pages(), check=True)
    assert found >= 4  # app-integration.md: the select reason, the sidecar, its recommended mode, metres
    assert stale == [], "stale output blocks (rerun: python -m da3_litert_farm.dev.doc_outputs README.md docs/*.md): " \
                        + ", ".join(stale)


def test_the_recorded_catalog_is_a_current_build_of_the_shipped_params():
    catalog, on = load_recorded()
    validate_catalog(catalog)  # the catalog format the code writes today
    assert stale_cells(catalog, planned_shapes()) == []
    assert {"date", "cpu", "commit", "weights", "command"} <= set(on)


def test_the_unrotated_sensor_frame_gets_the_exact_ratio():
    """4032x3024 is 4:3 exactly, and the shipped matrix has a 4x3 aspect (params.yaml): no crop; rotated, 3:4."""
    text = (REPO / "docs" / "app-integration.md").read_text()
    block = text[text.index("<!-- output:select-unrotated begin -->"):
                 text.index("<!-- output:select-unrotated end -->")]
    assert "-> small-896-4x3 (HxW 672x896, W/H 1.3333, 0.00% off)" in block
    assert "pass 3024x4032: it gets small-896-3x4 (HxW 896x672)" in block


def test_a_drifted_block_is_found_and_named(tmp_path, capsys):
    page = tmp_path / "app-integration.md"
    text = (REPO / "docs" / "app-integration.md").read_text()
    drifted = text.replace("-> small-896-4x3 (HxW 672x896, W/H 1.3333, 0.00% off)",
                           "-> small-896-16x9 (HxW 504x896, W/H 1.7778, 33.33% off)", 1)
    assert drifted != text
    page.write_text(drifted)
    assert update([page], check=True)[1] == [f"{page}: output:select-unrotated"]
    assert doc_outputs.main(["--check", str(page)]) == 1
    assert f"{page}: output:select-unrotated" in capsys.readouterr().out
    assert page.read_text() == drifted  # --check writes nothing
    assert doc_outputs.main([str(page)]) == 0
    assert page.read_text() == text  # and a rewrite puts back what the code prints


def test_a_catalog_of_other_cells_is_refused_naming_them(tmp_path):
    doc = json.loads(RECORDED.read_text())
    models = doc["catalog"]["models"]
    reshaped = next(m for m in models if m["cell"] == "small-896-9x16")
    reshaped["height"] = 880
    doc["catalog"]["models"] = [m for m in models if m["cell"] != "small-896-16x9"]
    other = tmp_path / "catalog.json"
    other.write_text(json.dumps(doc))
    with pytest.raises(OutputsError) as refused:
        update(pages(), check=True, recorded=other)
    message = str(refused.value)
    assert "small-896-16x9: planned 504x896, not in the recorded catalog" in message
    assert "small-896-9x16: planned 896x504, recorded 880x504" in message
    assert "make farm" in message
