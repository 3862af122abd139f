"""The modes an app can ask of LiteRT's GPU accelerator, by the names the farm gives them: the one place for them.

- fp16: the runtime's default, what an app gets unless it asks: tensors stored and computed in FP16.
- fp16_fp32_accum: FP16 storage, FP32 sums in CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV and
  BATCH_MATMUL (Kotlin `GpuOptions.Precision.FP16_WITH_FP32_ACCUM`, C++ `kFp16WithFp32Accum`).
- fp32: everything in FP32 (`enforce_f32`), to tell FP16 error from kernel error; no phone app ships it.
"""

MODES = ("fp16", "fp16_fp32_accum", "fp32")
DEFAULT_MODE = "fp16"
APP_MODES = ("fp16", "fp16_fp32_accum")  # what gpu@ASPECT may check a file in: the modes apps run
