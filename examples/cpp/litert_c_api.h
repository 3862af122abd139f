// The handful of LiteRT C API declarations that da3_depth.cc calls, written for this example from the
// documented signatures of LiteRT 2.2.0's public headers (litert/c/litert_common.h, litert_layout.h,
// litert_model_types.h, litert_environment.h, litert_model.h, litert_options.h, litert_opaque_options.h,
// litert_compiled_model.h,
// litert_tensor_buffer.h, litert_tensor_buffer_requirements.h). Linked and run against libLiteRt.so of
// the ai-edge-litert 2.3.0 wheel, whose symbols carry the version VERS_1.0. With LiteRT's own headers
// at hand, include those instead: they are the authority, this file is a minimal stand-in.
#ifndef DA3_LITERT_C_API_H_
#define DA3_LITERT_C_API_H_

#include <cstddef>
#include <cstdint>

extern "C" {

// Opaque handles: the library hands out pointers and takes them back; their types are never read.
typedef struct LiteRtEnvironmentT* LiteRtEnvironment;
typedef struct LiteRtModelT* LiteRtModel;
typedef struct LiteRtSignatureT* LiteRtSignature;
typedef struct LiteRtTensorT* LiteRtTensor;
typedef struct LiteRtOptionsT* LiteRtOptions;
typedef struct LiteRtOpaqueOptionsT* LiteRtOpaqueOptions;
typedef struct LiteRtCompiledModelT* LiteRtCompiledModel;
typedef struct LiteRtTensorBufferT* LiteRtTensorBuffer;
typedef struct LiteRtTensorBufferRequirementsT* LiteRtTensorBufferRequirements;
struct LiteRtEnvOption;  // only passed as a null array here

typedef int LiteRtStatus;  // an enum in the headers; 0 is kLiteRtStatusOk
typedef size_t LiteRtParamIndex;
typedef int LiteRtHwAcceleratorSet;  // a bit set of LiteRtHwAccelerators

enum : int { kLiteRtStatusOk = 0 };
enum : int { kLiteRtHwAcceleratorCpu = 1 << 0, kLiteRtHwAcceleratorGpu = 1 << 1, kLiteRtHwAcceleratorNpu = 1 << 2 };
// LiteRtDelegatePrecision (LiteRT 2.2+): what the GPU accelerator's "precision" option takes.
enum : int {
  kLiteRtDelegatePrecisionFp16 = 1,
  kLiteRtDelegatePrecisionFp32 = 2,
  kLiteRtDelegatePrecisionFp16WithFp32Accum = 3,
};
enum : int { kLiteRtTensorBufferLockModeRead = 0, kLiteRtTensorBufferLockModeWrite = 1 };
enum : int { kLiteRtElementTypeFloat32 = 1 };  // kTfLiteFloat32

// The one struct whose fields this program reads (the shape of a tensor). It is defined by the headers,
// not by the library, so its layout is part of the ABI: the headers assert these same sizes.
#define LITERT_TENSOR_MAX_RANK 8
typedef struct {
  unsigned int rank : 7;
  unsigned int has_strides : 1;
  int32_t dimensions[LITERT_TENSOR_MAX_RANK];
  uint32_t strides[LITERT_TENSOR_MAX_RANK];
} LiteRtLayout;
typedef struct {
  int element_type;  // LiteRtElementType
  LiteRtLayout layout;
} LiteRtRankedTensorType;
static_assert(sizeof(LiteRtLayout) == 68, "LiteRtLayout differs from LiteRT 2.2's");
static_assert(sizeof(LiteRtRankedTensorType) == 72, "LiteRtRankedTensorType differs from LiteRT 2.2's");

LiteRtStatus LiteRtCreateEnvironment(int num_options, const LiteRtEnvOption* options,
                                     LiteRtEnvironment* environment);
void LiteRtDestroyEnvironment(LiteRtEnvironment environment);

LiteRtStatus LiteRtCreateModelFromFile(LiteRtEnvironment environment, const char* filename, LiteRtModel* model);
void LiteRtDestroyModel(LiteRtModel model);
LiteRtStatus LiteRtGetNumModelSignatures(LiteRtModel model, LiteRtParamIndex* num_signatures);
LiteRtStatus LiteRtGetModelSignature(LiteRtModel model, LiteRtParamIndex signature_index,
                                     LiteRtSignature* signature);
LiteRtStatus LiteRtGetSignatureKey(LiteRtSignature signature, const char** signature_key);
LiteRtStatus LiteRtGetNumSignatureInputs(LiteRtSignature signature, LiteRtParamIndex* num_inputs);
LiteRtStatus LiteRtGetNumSignatureOutputs(LiteRtSignature signature, LiteRtParamIndex* num_outputs);
LiteRtStatus LiteRtGetSignatureInputTensorByIndex(LiteRtSignature signature, LiteRtParamIndex input_idx,
                                                  LiteRtTensor* tensor);
LiteRtStatus LiteRtGetSignatureOutputTensorByIndex(LiteRtSignature signature, LiteRtParamIndex output_idx,
                                                   LiteRtTensor* tensor);
LiteRtStatus LiteRtGetRankedTensorType(LiteRtTensor tensor, LiteRtRankedTensorType* ranked_tensor_type);

// Options an accelerator reads by name (the GPU's: "gpu_options", a TOML text such as "precision = 3\n").
// On success the options own the payload and free it with `payload_destructor`; once added, the options
// own the opaque options.
LiteRtStatus LiteRtCreateOpaqueOptions(const char* payload_identifier, void* payload_data,
                                       void (*payload_destructor)(void*), LiteRtOpaqueOptions* options);
void LiteRtDestroyOpaqueOptions(LiteRtOpaqueOptions options);
LiteRtStatus LiteRtAddOpaqueOptions(LiteRtOptions options, LiteRtOpaqueOptions opaque_options);

LiteRtStatus LiteRtCreateOptions(LiteRtOptions* options);
void LiteRtDestroyOptions(LiteRtOptions options);
LiteRtStatus LiteRtSetOptionsHardwareAccelerators(LiteRtOptions options,
                                                  LiteRtHwAcceleratorSet hardware_accelerators);

LiteRtStatus LiteRtCreateCompiledModel(LiteRtEnvironment environment, LiteRtModel model,
                                       LiteRtOptions compilation_options, LiteRtCompiledModel* compiled_model);
void LiteRtDestroyCompiledModel(LiteRtCompiledModel compiled_model);
// The requirements stay owned by the compiled model.
LiteRtStatus LiteRtGetCompiledModelInputBufferRequirements(LiteRtCompiledModel compiled_model,
                                                           LiteRtParamIndex signature_index,
                                                           LiteRtParamIndex input_index,
                                                           LiteRtTensorBufferRequirements* buffer_requirements);
LiteRtStatus LiteRtGetCompiledModelOutputBufferRequirements(LiteRtCompiledModel compiled_model,
                                                            LiteRtParamIndex signature_index,
                                                            LiteRtParamIndex output_index,
                                                            LiteRtTensorBufferRequirements* buffer_requirements);
LiteRtStatus LiteRtRunCompiledModel(LiteRtCompiledModel compiled_model, LiteRtParamIndex signature_index,
                                    size_t num_input_buffers, LiteRtTensorBuffer* input_buffers,
                                    size_t num_output_buffers, LiteRtTensorBuffer* output_buffers);

LiteRtStatus LiteRtCreateManagedTensorBufferFromRequirements(LiteRtEnvironment env,
                                                             const LiteRtRankedTensorType* tensor_type,
                                                             LiteRtTensorBufferRequirements requirements,
                                                             LiteRtTensorBuffer* buffer);
void LiteRtDestroyTensorBuffer(LiteRtTensorBuffer buffer);
LiteRtStatus LiteRtLockTensorBuffer(LiteRtTensorBuffer tensor_buffer, void** host_mem_addr, int lock_mode);
LiteRtStatus LiteRtUnlockTensorBuffer(LiteRtTensorBuffer buffer);

}  // extern "C"

#endif  // DA3_LITERT_C_API_H_
