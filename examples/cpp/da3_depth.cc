// Runs one signature of a farm .tflite (a single file or the bundle) with LiteRT's C API.
//
//   da3_depth MODEL.tflite SIGNATURE INPUT.f32 OUTPUT.f32 [cpu|gpu|gpu-fp32-accum]
//   da3_depth NPU_MODEL.tflite SIGNATURE INPUT.f32 OUTPUT.f32 npu GPU_MODEL.tflite
//
// INPUT.f32 is the preprocessed input, raw float32 [1, 3, H, W] (NCHW, ImageNet-normalized: see
// docs/app-integration.md); OUTPUT.f32 gets the raw float32 [1, 1, H, W] depth. SIGNATURE is a signature key
// ("9x16", ...; a single file's own key is "serving_default"). `gpu` asks for the GPU accelerator in its
// default precision (FP16), `gpu-fp32-accum` for FP16 storage with FP32 accumulation (the mode a sidecar's
// gpu.recommended_mode names when it is closer to the official model); both fall back to the CPU when the
// GPU accelerator cannot be created. `npu` runs a file compiled for the phone's Qualcomm chip (farm pull --soc) on
// LiteRT's NPU runtime; where that runtime or its Qualcomm libraries are missing (any machine but such a phone), it
// runs GPU_MODEL, the cell's GPU file, on the GPU instead (or the CPU). Prints the shapes and the accelerator that ran.
//
// Build: examples/cpp/build.sh (g++ against the libLiteRt.so of the ai-edge-litert wheel).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "litert_c_api.h"

namespace {

bool Ok(LiteRtStatus status, const char* what) {
  if (status != kLiteRtStatusOk) std::fprintf(stderr, "da3_depth: %s failed: LiteRtStatus %d\n", what, status);
  return status == kLiteRtStatusOk;
}

size_t Elements(const LiteRtRankedTensorType& type) {
  size_t n = 1;
  for (unsigned i = 0; i < type.layout.rank; ++i) n *= static_cast<size_t>(type.layout.dimensions[i]);
  return n;
}

std::string Shape(const LiteRtRankedTensorType& type) {
  std::string s = "[";
  for (unsigned i = 0; i < type.layout.rank; ++i) s += (i ? ", " : "") + std::to_string(type.layout.dimensions[i]);
  return s + "]";
}

bool ReadFile(const char* path, std::vector<char>* data) {
  FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) data->insert(data->end(), chunk, chunk + n);
  std::fclose(f);
  return true;
}

// Releases whatever was created, in reverse order, on every path out of Run.
struct Handles {
  LiteRtEnvironment env = nullptr;
  LiteRtModel model = nullptr;
  LiteRtOptions options = nullptr;
  LiteRtCompiledModel compiled = nullptr;
  LiteRtTensorBuffer input = nullptr, output = nullptr;
  ~Handles() {
    if (input) LiteRtDestroyTensorBuffer(input);
    if (output) LiteRtDestroyTensorBuffer(output);
    if (compiled) LiteRtDestroyCompiledModel(compiled);  // before the model it was compiled from
    if (options) LiteRtDestroyOptions(options);
    if (model) LiteRtDestroyModel(model);
    if (env) LiteRtDestroyEnvironment(env);
  }
};

// Adds options that an accelerator or the runtime reads by name, holding TOML text: how LiteRT's C++ option
// classes reach them, since the C API has no setter of its own for these. The options free the malloc'd copy
// of the text when they are destroyed.
bool AddOpaqueOptions(LiteRtOptions options, const char* identifier, const std::string& text) {
  char* toml = static_cast<char*>(std::malloc(text.size() + 1));
  if (!toml) return false;
  std::memcpy(toml, text.c_str(), text.size() + 1);
  LiteRtOpaqueOptions opaque = nullptr;
  if (!Ok(LiteRtCreateOpaqueOptions(identifier, toml, std::free, &opaque), "LiteRtCreateOpaqueOptions")) {
    std::free(toml);
    return false;
  }
  if (!Ok(LiteRtAddOpaqueOptions(options, opaque), "LiteRtAddOpaqueOptions")) {
    LiteRtDestroyOpaqueOptions(opaque);
    return false;
  }
  return true;
}

// Asks the GPU accelerator for a precision (kLiteRtDelegatePrecision*), as C++ GpuOptions::SetPrecision does.
bool SetGpuPrecision(LiteRtOptions options, int precision) {
  return AddOpaqueOptions(options, "gpu_options", "precision = " + std::to_string(precision) + "\n");
}

// Prepares only the signature `key` of a bundle, as C++ RuntimeOptions::SetSelectedSignatures does. Without it
// the compiled model prepares every signature, and a bundle's load costs each one's memory.
bool SelectSignature(LiteRtOptions options, const char* key) {
  return AddOpaqueOptions(options, "runtime_options_string",
                          std::string("selected_signature_keys = [\"") + key + "\"]\n");  // keys hold no quotes
}

// Compiles signature `key` of `model` for `accelerators` (with a GPU precision when `precision` is not 0);
// false (and nothing held) when that accelerator is unavailable.
bool Compile(Handles* h, const char* key, LiteRtHwAcceleratorSet accelerators, int precision = 0) {
  if (!Ok(LiteRtCreateOptions(&h->options), "LiteRtCreateOptions") ||
      !Ok(LiteRtSetOptionsHardwareAccelerators(h->options, accelerators), "LiteRtSetOptionsHardwareAccelerators") ||
      !SelectSignature(h->options, key) || (precision != 0 && !SetGpuPrecision(h->options, precision)))
    return false;
  bool ok = Ok(LiteRtCreateCompiledModel(h->env, h->model, h->options, &h->compiled), "LiteRtCreateCompiledModel");
  LiteRtDestroyOptions(h->options);  // the caller keeps ownership of the options; the compiled model needs them no more
  h->options = nullptr;
  if (!ok) h->compiled = nullptr;
  return ok;
}

constexpr int kNoNpu = 3;  // Run's status when the NPU runtime cannot compile the model

// want_gpu: the GPU accelerator, in `gpu_precision` (kLiteRtDelegatePrecision*; 0: the accelerator's default).
// want_npu: the NPU accelerator only (a compiled file has nothing else to run on); kNoNpu where it is missing.
int Run(const char* model_path, const char* key, const char* input_path, const char* output_path, bool want_gpu,
        int gpu_precision, bool want_npu = false) {
  Handles h;
  if (!Ok(LiteRtCreateEnvironment(0, nullptr, &h.env), "LiteRtCreateEnvironment") ||
      !Ok(LiteRtCreateModelFromFile(h.env, model_path, &h.model), "LiteRtCreateModelFromFile"))
    return 1;

  // The signature's index: the compiled model's calls take an index, the app knows a key.
  LiteRtParamIndex count = 0, index = 0;
  LiteRtSignature signature = nullptr;
  if (!Ok(LiteRtGetNumModelSignatures(h.model, &count), "LiteRtGetNumModelSignatures")) return 1;
  std::string keys;
  for (index = 0; index < count; ++index) {
    const char* name = nullptr;
    if (!Ok(LiteRtGetModelSignature(h.model, index, &signature), "LiteRtGetModelSignature") ||
        !Ok(LiteRtGetSignatureKey(signature, &name), "LiteRtGetSignatureKey"))
      return 1;
    if (std::strcmp(name, key) == 0) break;
    keys += std::string(keys.empty() ? "" : ", ") + name;
  }
  if (index == count) {
    std::fprintf(stderr, "da3_depth: %s has no signature '%s'; it has: %s\n", model_path, key, keys.c_str());
    return 2;
  }

  LiteRtParamIndex inputs = 0, outputs = 0;
  LiteRtTensor in_tensor = nullptr, out_tensor = nullptr;
  LiteRtRankedTensorType in_type{}, out_type{};
  if (!Ok(LiteRtGetNumSignatureInputs(signature, &inputs), "LiteRtGetNumSignatureInputs") ||
      !Ok(LiteRtGetNumSignatureOutputs(signature, &outputs), "LiteRtGetNumSignatureOutputs"))
    return 1;
  if (inputs != 1 || outputs != 1) {
    std::fprintf(stderr, "da3_depth: signature '%s' has %zu inputs and %zu outputs, not one each\n", key, inputs,
                 outputs);
    return 2;
  }
  if (!Ok(LiteRtGetSignatureInputTensorByIndex(signature, 0, &in_tensor), "LiteRtGetSignatureInputTensorByIndex") ||
      !Ok(LiteRtGetSignatureOutputTensorByIndex(signature, 0, &out_tensor), "LiteRtGetSignatureOutputTensorByIndex") ||
      !Ok(LiteRtGetRankedTensorType(in_tensor, &in_type), "LiteRtGetRankedTensorType(input)") ||
      !Ok(LiteRtGetRankedTensorType(out_tensor, &out_type), "LiteRtGetRankedTensorType(output)"))
    return 1;
  if (in_type.element_type != kLiteRtElementTypeFloat32 || out_type.element_type != kLiteRtElementTypeFloat32) {
    std::fprintf(stderr, "da3_depth: signature '%s' is not float32 in and out\n", key);
    return 2;
  }
  const size_t in_bytes = Elements(in_type) * sizeof(float), out_bytes = Elements(out_type) * sizeof(float);

  std::vector<char> input;
  if (!ReadFile(input_path, &input)) {
    std::fprintf(stderr, "da3_depth: cannot read %s\n", input_path);
    return 2;
  }
  if (input.size() != in_bytes) {
    std::fprintf(stderr, "da3_depth: %s holds %zu bytes; signature '%s' takes float32 %s, %zu bytes\n", input_path,
                 input.size(), key, Shape(in_type).c_str(), in_bytes);
    return 2;
  }

  // GPU where asked and available, else the CPU (XNNPACK): a phone without the GPU accelerator still runs.
  const char* ran_on = "cpu";
  if (want_npu) {
    if (!Compile(&h, key, kLiteRtHwAcceleratorNpu)) return kNoNpu;
    ran_on = "npu";
  } else if (want_gpu && Compile(&h, key, kLiteRtHwAcceleratorGpu, gpu_precision)) {
    ran_on = gpu_precision == kLiteRtDelegatePrecisionFp16WithFp32Accum ? "gpu (fp16, fp32 accumulation)" : "gpu";
  } else {
    if (want_gpu) std::fprintf(stderr, "da3_depth: no GPU accelerator; running on the CPU\n");
    if (!Compile(&h, key, kLiteRtHwAcceleratorCpu)) return 1;
  }

  LiteRtTensorBufferRequirements in_req = nullptr, out_req = nullptr;
  if (!Ok(LiteRtGetCompiledModelInputBufferRequirements(h.compiled, index, 0, &in_req), "input requirements") ||
      !Ok(LiteRtGetCompiledModelOutputBufferRequirements(h.compiled, index, 0, &out_req), "output requirements") ||
      !Ok(LiteRtCreateManagedTensorBufferFromRequirements(h.env, &in_type, in_req, &h.input), "input buffer") ||
      !Ok(LiteRtCreateManagedTensorBufferFromRequirements(h.env, &out_type, out_req, &h.output), "output buffer"))
    return 1;

  void* host = nullptr;
  if (!Ok(LiteRtLockTensorBuffer(h.input, &host, kLiteRtTensorBufferLockModeWrite), "lock input")) return 1;
  std::memcpy(host, input.data(), in_bytes);
  if (!Ok(LiteRtUnlockTensorBuffer(h.input), "unlock input")) return 1;

  if (!Ok(LiteRtRunCompiledModel(h.compiled, index, 1, &h.input, 1, &h.output), "LiteRtRunCompiledModel")) return 1;

  if (!Ok(LiteRtLockTensorBuffer(h.output, &host, kLiteRtTensorBufferLockModeRead), "lock output")) return 1;
  FILE* f = std::fopen(output_path, "wb");
  const bool written = f && std::fwrite(host, 1, out_bytes, f) == out_bytes;
  if (f) std::fclose(f);
  LiteRtUnlockTensorBuffer(h.output);
  if (!written) {
    std::fprintf(stderr, "da3_depth: cannot write %s\n", output_path);
    return 1;
  }
  std::printf("signature %s (index %zu of %zu): input %s -> output %s on the %s\n", key, index, count,
              Shape(in_type).c_str(), Shape(out_type).c_str(), ran_on);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[5], "npu") == 0) {
    const int status = Run(argv[1], argv[2], argv[3], argv[4], false, 0, true);
    if (status != kNoNpu) return status;
    std::fprintf(stderr, "da3_depth: no NPU runtime for %s; running %s on the GPU\n", argv[1], argv[6]);
    return Run(argv[6], argv[2], argv[3], argv[4], true, 0);
  }
  const char* where = argc == 6 ? argv[5] : "cpu";
  const bool accum = std::strcmp(where, "gpu-fp32-accum") == 0;
  const bool gpu = accum || std::strcmp(where, "gpu") == 0;
  if ((argc != 5 && argc != 6) || (!gpu && std::strcmp(where, "cpu") != 0)) {
    std::fprintf(stderr, "usage: %s MODEL.tflite SIGNATURE INPUT.f32 OUTPUT.f32 [cpu|gpu|gpu-fp32-accum | npu "
                 "GPU_MODEL.tflite]\n", argv[0]);
    return 2;
  }
  return Run(argv[1], argv[2], argv[3], argv[4], gpu, accum ? kLiteRtDelegatePrecisionFp16WithFp32Accum : 0);
}
