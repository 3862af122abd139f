"""Figures in the docs are the render of the JSON their command wrote (da3_litert_farm.dev.figures)."""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from da3_litert_farm.dev import bench_build, bench_install, figures

REPO = Path(__file__).resolve().parents[1]

KNOWN = {
    "measured_on": {"date": "2026-12-05", "cpu": "Intel(R) Xeon(R) Processor (family 6 model 207), 2 cores",
                    "commit": "abc1234", "command": "python -m da3_litert_farm.dev.bench --height 896 --width 504"},
    "figures": [
        {"quantity": "convert (litert-torch)", "value": 48.66, "unit": "s"},
        {"quantity": "size FP16", "value": 51.982496, "unit": "MB"},
        {"quantity": "peak RSS", "value": 4321.9, "unit": "MB"},
        {"quantity": "CPU FP16 1 - r", "value": 4.2671345e-07, "unit": ""},
        {"quantity": "GPU-clean", "value": True, "unit": ""},
        {"quantity": "ops", "value": 1555, "unit": ""},
        {"quantity": "adapter", "value": "a | b", "unit": ""},
    ],
}
KNOWN_MD = """\
| quantity | value | unit |
|---|---|---|
| convert (litert-torch) | 48.7 | s |
| size FP16 | 52.0 | MB |
| peak RSS | 4322 | MB |
| CPU FP16 1 - r | 4.3e-7 |  |
| GPU-clean | yes |  |
| ops | 1555 |  |
| adapter | a \\| b |  |

Measured 2026-12-05 on Intel(R) Xeon(R) Processor (family 6 model 207), 2 cores, commit abc1234: \
`python -m da3_litert_farm.dev.bench --height 896 --width 504`"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "known.json").write_text(json.dumps(KNOWN))
    return tmp_path / "figures"


def test_render_writes_the_table_and_where_it_was_measured(folder):
    assert figures.render("known", folder=folder) == KNOWN_MD


def test_a_column_of_small_numbers_is_all_in_scientific_notation(folder):
    doc = {"measured_on": {**KNOWN["measured_on"], "weights": "stress weights (seed 0)"},
           "figures": [{"aspect": "a", "GPU mean rel": 0.0097, "MB": 52.0},
                       {"aspect": "b", "GPU mean rel": 0.0109, "MB": 0.005}]}
    (folder / "small.json").write_text(json.dumps(doc))
    lines = figures.render("small", folder=folder).splitlines()
    # 0.0109 joins its column's notation; the MB column has a number over 1, so only 0.005 is written small
    assert lines[2:4] == ["| a | 9.7e-3 | 52.0 |", "| b | 1.1e-2 | 5.0e-3 |"]
    assert lines[-1].startswith("Measured 2026-12-05 on Intel(R) Xeon(R) Processor (family 6 model 207), 2 cores, "
                                "commit abc1234, stress weights (seed 0): `")


def test_record_says_when_where_and_at_which_commit(tmp_path):
    path = figures.record("t", [{"a": 1}], "python -m x --y", folder=tmp_path)
    on = json.loads(path.read_text())["measured_on"]
    assert on["date"] == datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert on["commit"] in (head, f"{head}-dirty")
    model = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M).group(1)
    assert on["cpu"].startswith(model.strip() + " (family ")
    assert on["cpu"].endswith(f", {len(os.sched_getaffinity(0))} cores")
    assert on["command"] == "python -m x --y"
    assert json.loads(path.read_text())["figures"] == [{"a": 1}]


def test_dirty_when_a_tracked_file_differs(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = functools.partial(subprocess.run, cwd=repo, check=True, capture_output=True)
    git(["git", "init", "-q"])
    (repo / "f").write_text("one\n")
    git(["git", "add", "f"])
    git(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one"])
    monkeypatch.setattr(figures, "REPO", repo)
    head = git(["git", "rev-parse", "--short", "HEAD"], text=True).stdout.strip()
    (repo / "untracked").write_text("x")
    assert figures.git_commit() == head
    (repo / "f").write_text("two\n")
    assert figures.git_commit() == f"{head}-dirty"


PAGE = """# Title

Before, with a table | a | b | that is not ours.
<!-- figures:known begin -->
| old | table |
|---|---|
<!-- figures:known end -->
After.
"""


def test_update_replaces_only_the_marked_section(tmp_path, folder):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert figures.update([page], folder=folder) == (1, [f"{page}: figures:known"])
    text = page.read_text()
    head, tail = PAGE.split("<!-- figures:known begin -->")[0], PAGE.split("<!-- figures:known end -->")[1]
    assert text == f"{head}<!-- figures:known begin -->\n{KNOWN_MD}\n<!-- figures:known end -->{tail}"
    assert figures.update([page], folder=folder) == (1, [])  # a second run changes nothing


def test_a_begin_without_its_end_is_refused(tmp_path, folder):
    page = tmp_path / "page.md"
    page.write_text("x\n<!-- figures:known begin -->\nold\n<!-- figures:other end -->\n")
    with pytest.raises(figures.FiguresError,
                       match=re.escape(f"{page}: <!-- figures:known begin --> has no <!-- figures:known end --> after it")):
        figures.update([page], folder=folder)
    page.write_text("x\n<!-- figures:known end -->\n")
    with pytest.raises(figures.FiguresError,
                       match=re.escape(f"{page}: <!-- figures:known end --> has no <!-- figures:known begin --> before")):
        figures.update([page], folder=folder)


def test_a_name_with_no_json_is_refused(tmp_path, folder):
    page = tmp_path / "page.md"
    page.write_text("<!-- figures:missing begin -->\n<!-- figures:missing end -->\n")
    with pytest.raises(figures.FiguresError,
                       match=re.escape(f"{page}: <!-- figures:missing begin -->: no {folder / 'missing.json'}: "
                                       "record it first")):
        figures.update([page], folder=folder)
    assert page.read_text() == "<!-- figures:missing begin -->\n<!-- figures:missing end -->\n"


def test_check_fails_on_a_stale_section_and_passes_after_the_update(tmp_path, folder, capsys):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    args = ["--figures-dir", str(folder), str(page)]
    assert figures.main(["--check", *args]) == 1
    err = capsys.readouterr().err
    assert f"figures: stale: {page}: figures:known" in err
    assert page.read_text() == PAGE  # --check writes nothing

    assert figures.main(args) == 0
    assert capsys.readouterr().out == "figures: rewrote 1 of 1 sections in 1 file\n"
    assert figures.main(["--check", *args]) == 0
    assert capsys.readouterr() == ("figures: 1 sections in 1 file, all up to date\n", "")


def test_catalog_rows_from_a_farm_catalog(tmp_path):
    fidelity = {"pearson_min": 0.9999996, "mean_rel_error_max": 0.0008}
    catalog = {
        "created": "2026-12-05T13:51:22Z",
        "sources": {"small": {"checkpoint": {"source": "random", "seed": 0, "outliers": False}}},
        "models": [
            {"cell": "small-896-9x16", "height": 896, "width": 504, "bytes": 51_982_496, "fidelity": fidelity,
             "gpu": {"checked": True, "pearson_min": 0.99946, "mean_rel_max": 0.0097, "adapter": "llvmpipe"}},
            {"cell": "small-896-16x9", "height": 504, "width": 896, "bytes": 52_000_000, "fidelity": fidelity,
             "gpu": {"checked": False, "reason": "no adapter"}},
        ],
        "bundles": [{"bundle": "small-896", "bytes": 26_000_000, "singles_bytes": 103_982_496,
                     "signatures": [{"cell": "small-896-9x16"}, {"cell": "small-896-16x9"}]}],
    }
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    figures.record_catalog(path, "f00ba12", "python -m da3_litert_farm.dev.figures catalog c.json --commit f00ba12",
                           folder=tmp_path)
    lines = figures.render("catalog", folder=tmp_path).splitlines()
    assert lines[0] == ("| cell | H x W | MB | CPU 1 - r | CPU mean rel | GPU 1 - r | GPU mean rel | GPU adapter "
                        "| x of the single files |")
    assert lines[2:5] == [
        "| small-896-9x16 | 896 x 504 | 52.0 | 4.0e-7 | 8.0e-4 | 5.4e-4 | 9.7e-3 | llvmpipe |  |",
        "| small-896-16x9 | 504 x 896 | 52.0 | 4.0e-7 | 8.0e-4 | skipped | skipped | skipped |  |",
        "| bundle small-896 | all 2 | 26.0 |  |  |  |  |  | 0.250 |",
    ]
    assert lines[-1].startswith("Measured 2026-12-05 on ")
    assert lines[-1].endswith(", commit f00ba12, stress weights (seed 0), not a trained checkpoint: "
                              "`python -m da3_litert_farm.dev.figures catalog c.json --commit f00ba12`")


def test_a_catalog_recorded_with_its_cost_says_what_each_file_costs(tmp_path):
    catalog = {
        "created": "2026-12-06T19:40:00Z",
        "sources": {"metric": {"checkpoint": {"source": "random", "seed": 0, "outliers": False}}},
        "models": [{"cell": "metric-518-3x4", "height": 518, "width": 392, "bytes": 680_000_000,
                    "output": {"model": "da3metric-large"}, "gpu_lint": {"gmac": 512.3},
                    "cost": {"cpu_ms": 4321.0, "cpu_threads": 2, "gpu_seconds": 301.5, "export_seconds": 402.1,
                             "export_peak_rss_mib": 17890},
                    "fidelity": {"pearson_min": 0.9999991, "mean_rel_error_max": 0.0011},
                    "gpu": {"checked": True, "pearson_min": 0.9991, "mean_rel_max": 0.012, "adapter": "llvmpipe"}}],
        "bundles": [{"bundle": "metric-518", "bytes": 686_000_000, "singles_bytes": 680_000_000,
                     "signatures": [{"cell": "metric-518-3x4"}],
                     "load": {"gpu": {"bundle": {"seconds": 12.7, "peak_growth_mib": 5959.5},
                                      "bundle_one_signature": {"signature": "3x4", "seconds": 3.4,
                                                               "peak_growth_mib": 4075.4},
                                      "single": {"cell": "metric-518-3x4", "seconds": 3.3,
                                                 "peak_growth_mib": 4071.7}}}}],
    }
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    command = "python -m da3_litert_farm.dev.figures catalog c.json --commit f00ba12 --record large --cost"
    figures.record_catalog(path, "f00ba12", command, folder=tmp_path, name="large", cost=True)
    lines = figures.render("large", folder=tmp_path).splitlines()
    assert lines[0] == ("| cell | H x W | MB | model | GMAC | CPU ms | GPU s | export s | export peak RSS MiB "
                        "| CPU 1 - r | CPU mean rel | GPU 1 - r | GPU mean rel | x of the single files | x the largest file |")
    assert lines[2] == "| metric-518-3x4 | 518 x 392 | 680 | da3metric-large | 512 | 4321 | 302 | 402 | 17890 | 9.0e-7 | 1.1e-3 " \
                       "| 9.0e-4 | 0.0120 |  |  |"
    assert lines[3] == "| bundle metric-518 | all 1 | 686 |  |  |  |  |  |  |  |  |  |  | 1.01 | 1.01 |"
    assert lines[-1].endswith(", GPU check on llvmpipe: `" + command + "`")
    load = figures.render("large-load", folder=tmp_path).splitlines()
    assert load[:5] == ["| bundle | runtime | load | seconds | peak growth MiB | x the file's memory |",
                        "|---|---|---|---|---|---|",
                        "| metric-518 | GPU | bundle, every signature | 12.7 | 5960 | 1.46 |",
                        "| metric-518 | GPU | bundle, only 3x4 | 3.40 | 4075 | 1.00 |",
                        "| metric-518 | GPU | metric-518-3x4's own file | 3.30 | 4072 | 1.00 |"]


def test_bench_install_records_what_it_prints(tmp_path, monkeypatch, capsys):
    def measure(python, variant, work):  # the installs take minutes: the plumbing, not pip, is under test
        return {"variant": variant, "python": "3.11.9", "seconds": 12.34, "mb": 1234.5, "dists": 7}

    monkeypatch.setattr(bench_install, "measure", measure)
    monkeypatch.setattr(figures, "record", functools.partial(figures.record, folder=tmp_path))
    assert bench_install.main(["--only", "client", "--record", "install"]) == 0
    assert "client            python 3.11.9   install   12.3 s   venv    1234 MB   7 distributions" in capsys.readouterr().out
    doc = json.loads((tmp_path / "install.json").read_text())
    assert doc["measured_on"]["command"] == "python -m da3_litert_farm.dev.bench_install --only client --record install"
    assert figures.render("install", folder=tmp_path).splitlines()[:3] == [
        "| variant | python | install s | venv MB | distributions |", "|---|---|---|---|---|",
        "| client | 3.11.9 | 12.3 | 1234 | 7 |"]


def test_bench_build_rows_are_its_printed_timings():
    measured = {"sequential_s": 300.0, "sequential_rss_mb": 2500.0, "parallel_s": 200.0, "removed_s": 3.0,
                "readded_s": 9.0, "push_s": 4.0, "pull_s": 30.0, "convert_s": 60.0, "gpu_s": 40.0,
                "estimate_s": 1200.0, "one_machine_s": 2400.0}
    rows = bench_build.figure_rows(measured, jobs=2, machines=8, aspects=24)
    assert rows[2] == {"quantity": "3 aspects from nothing, parallel build --jobs 2", "value": 200.0, "unit": "s"}
    assert rows[-2:] == [{"quantity": "estimate, 24 aspects on 8 machines", "value": 20.0, "unit": "min"},
                         {"quantity": "estimate, 24 aspects on one machine", "value": 40.0, "unit": "min"}]
    assert len(rows) == len(measured)


def test_bench_rows_name_each_quantity_and_unit():
    from da3_litert_farm.dev import bench  # torch: the conftest has imported it already

    photo = {"pearson": 0.9999996, "cosine": 1.0, "max_abs_error": 0.01, "mean_rel_error": 0.0008}
    gpu = {"load_s": 1.5, "inference_s": 60.0, "fully_accelerated": True, "adapter": "llvmpipe",
           "pearson": 0.9995, "mean_rel_error": 0.0097}
    result = {"upsampler": "pixel_shuffle", "patched_torch_s": 2.0, "convert_s": 48.0, "convert_peak_rss_mb": 4000.0,
              "quantize_s": 5.0, "fp32_mb": 100.0, "fp16_mb": 52.0, "tflite_fp16_s": 0.5, "tflite_fp32_s": 0.6,
              "gpu_clean": True, "ops": 1555, "per_photo": {"coffee": photo},
              "gpu": {"photo": "coffee", "fp16": gpu, "fp32": gpu}}
    rows = bench.figure_rows(4.0, [result])
    assert rows[0] == {"quantity": "official PyTorch eager (FP32)", "value": 4.0, "unit": "s/image"}
    by_name = {r["quantity"]: (r["value"], r["unit"]) for r in rows}
    assert by_name["TFLite CPU FP16 speed-up over official eager"] == (8.0, "x")
    assert by_name["convert peak RSS"] == (4000.0, "MB")
    assert by_name["CPU FP16 mean rel error, coffee"] == (0.0008, "")
    assert by_name["GPU enforce_f32 one inference"] == (60.0, "s")
    compared = bench.figure_rows(4.0, [result, {**result, "upsampler": "zero_stuff"}])
    assert {r.get("upsampler") for r in compared} == {None, "pixel_shuffle", "zero_stuff"}
    assert len(compared) == 2 * len(rows) - 1


SECTION = re.compile(r"<!-- figures:([A-Za-z0-9_-]+) begin -->(.*?)<!-- figures:\1 end -->", re.S)


def test_every_figures_section_in_the_docs_is_the_render_of_its_committed_json():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert pages[0].is_file() and len(pages) >= 2, pages  # the README and at least one page in docs/
    for page in pages:
        text = page.read_text()
        sections = SECTION.findall(text)
        assert 2 * len(sections) == text.count("<!-- figures:"), f"{page}: a figures marker without its pair"
        for name, body in sections:
            assert body == "\n" + figures.render(name) + "\n", \
                f"{page}: figures:{name} is stale; run python -m da3_litert_farm.dev.figures {page}"
