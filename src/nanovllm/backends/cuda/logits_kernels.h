// The sampler's optional passes (logits_kernels.cu), launched by CudaBackend::sample only for the
// rows that ask: logits processing (structured-output masks, penalties, logit_bias, min_tokens;
// backends/logits_processing.h) and logprobs (log-softmax + top-N).
#pragma once
#include <cstdint>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/utils/dtype.h"

namespace nanovllm::cuda {

// A row's penalties, its entries [begin, end) of the LogitAdjust array (same layout as
// nanovllm::LogitAdjust: token, output_count, flags, bias) and its structured-output mask: row
// `mask` of the packed masks ((V + 31) / 32 words each), -1 for none.
struct DevPenalties {
  float repetition, frequency, presence;
  int32_t begin, end;
  int32_t mask;
};

// out [B, V] F32 = logits [B, V] (F32 or BF16), -inf where a row's mask does not allow the token,
// with each row's entries applied. masks: [rows with a mask, (V + 31) / 32] (null when none).
void launch_process_logits(const void* logits, DType dtype, int64_t B, int64_t V, const DevPenalties* rows,
                           const void* entries, const uint32_t* masks, float* out, Stream st);

// One row that asks for logprobs: which logits row, from which source (processed: the F32
// processed logits, else the raw ones), the scale (1 / temperature for processed logprobs) and N.
struct DevLogprobRow {
  int32_t row, n, processed;
  float scale;
};

// For each of the R rows: out[r * stride] = log_softmax(x * scale)[tokens[row]], out[r * stride + 1]
// its rank (as a float), then N pairs (token id as float bits, logprob), best first, lower id on ties;
// stride = 2 + 2 * max_n.
void launch_logprobs(const void* raw, DType dtype, const float* processed, int64_t V, const DevLogprobRow* rows,
                     int64_t R, const int32_t* tokens, float* out, int64_t max_n, Stream st);

}  // namespace nanovllm::cuda
