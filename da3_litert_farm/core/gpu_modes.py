"""The modes an app can ask of LiteRT's GPU accelerator, by the names the farm gives them: the one place for them.

- fp16: the runtime's default, what an app gets unless it asks: tensors stored and computed in FP16.
- fp16_fp32_accum: FP16 storage, FP32 sums in CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV and
  BATCH_MATMUL (Kotlin `GpuOptions.Precision.FP16_WITH_FP32_ACCUM`, C++ `kFp16WithFp32Accum`).
- fp32: everything in FP32 (`enforce_f32`), to tell FP16 error from kernel error; no phone app ships it.
"""

MODES = ("fp16", "fp16_fp32_accum", "fp32")
DEFAULT_MODE = "fp16"
APP_MODES = ("fp16", "fp16_fp32_accum")  # what gpu@ASPECT may check a file in: the modes apps run

# How an app asks for each mode, in LiteRT's Kotlin and C++ APIs (docs/android.md and docs/cpp.md show them in
# context; LiteRT's Swift API has no such setting: docs/ios.md).
APP_SETTING = {
    "fp16": {"kotlin": "CompiledModel.Options(Accelerator.GPU) (no gpuOptions: the default precision)",
             "cpp": "no GpuOptions precision (the default)"},
    "fp16_fp32_accum": {"kotlin": "gpuOptions = CompiledModel.GpuOptions(precision = "
                                  "CompiledModel.GpuOptions.Precision.FP16_WITH_FP32_ACCUM)",
                        "cpp": "gpu_options.SetPrecision(GpuOptions::Precision::kFp16WithFp32Accum)"},
}

RECOMMENDATION_RULE = ("of the modes the file was checked in, the one that passed its gates with the highest worst-photo "
                       "Pearson r against the official model; the default on a tie. Seconds on the farm's adapter are "
                       "recorded beside it, not weighed: a software adapter's time does not predict a phone's")


def recommend(figures: dict[str, dict]) -> str:
    """The mode to recommend to an app (RECOMMENDATION_RULE), from {mode: {"passed", "pearson_min"}} of each
    mode the file was checked in."""
    passing = [m for m in APP_MODES if m in figures and figures[m]["passed"]]
    return max(passing, key=lambda m: (figures[m]["pearson_min"], m == DEFAULT_MODE), default=DEFAULT_MODE)
