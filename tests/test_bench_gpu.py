"""The GPU profile's bookkeeping (the timings themselves are printed by make bench-gpu, never asserted)."""

from da3_litert_farm.dev.bench_gpu import busy_shares, shares_by_library, summary_rows

# What `perf report --no-children --sort dso --stdio` printed for a gpu@9x16 inference on lavapipe.
PERF_REPORT = """# Samples: 2K of event 'cpu-clock:pppH'
#
# Overhead  Shared Object
# ........  .................
#
    98.66%  [JIT] tid 17650
     1.15%  libm.so.6
     0.11%  [kernel.kallsyms]
     0.07%  libc.so.6
"""


def test_perf_samples_are_grouped_by_library():
    assert shares_by_library(PERF_REPORT) == {"[JIT]": 98.66, "libm.so.6": 1.15, "[kernel.kallsyms]": 0.11,
                                              "libc.so.6": 0.07}


def test_core_busy_share_is_busy_jiffies_over_all_jiffies_per_core():
    before = [(100, 1000), (50, 1000)]
    after = [(190, 1100), (55, 1100)]  # core 0 busy 90 of 100 jiffies, core 1 busy 5 of 100
    assert busy_shares(before, after) == [0.9, 0.05]


def test_the_summary_takes_later_inferences_apart_from_the_first():
    run = {"setting": "default", "setup": {"seconds": 1.5}, "compile": {"seconds": 3.0, "precision": "fp16"}, "inferences": [
        {"seconds": 80.0, "read_s": 0.1, "core_busy": [1.0, 1.0], "one_minus_r": 5e-4, "mean_rel_error": 9e-3},
        {"seconds": 60.0, "read_s": 0.2, "core_busy": [0.9, 0.8], "one_minus_r": 6e-4, "mean_rel_error": 8e-3},
        {"seconds": 62.0, "read_s": 0.1, "core_busy": [0.95, 0.85], "one_minus_r": 4e-4, "mean_rel_error": 7e-3}],
        "graph": {"gmac": 117.55, "gmac_per_s": 1.96},
        "ops": [{"op": "FULLY_CONNECTED [2305, 384] x [384, 1536] (MLP)", "gmac_per_s": 1.1}]}
    (row,) = summary_rows([run])
    assert row["graph GMAC/s"] == 1.96 and row["MLP GMAC/s"] == 1.1 and row["precision"] == "fp16"
    assert row["first inference s"] == 80.0 and row["later inference s"] == 61.0
    assert row["read-back s"] == 0.2 and row["core busy (later)"] == "0.95 / 0.85"
    assert row["1 - r (worst)"] == 6e-4 and row["mean rel (worst)"] == 9e-3
