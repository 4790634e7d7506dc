// The values of dummy weights (--load-format dummy): dst[c] = uniform(-a, a) drawn from the
// counter-based sampling_uniform(seed, 0, base + c), so every element depends only on its tensor's
// seed and its index in the full tensor (a shard holds exactly the full tensor's slice).
#pragma once
#include <cstdint>

namespace nanovllm {

// dst[c] = (2 * sampling_uniform(seed, 0, base + c) - 1) * a for c < cols. An AVX-512 variant
// (8 counters per vector, vpmullq) runs where the CPU has AVX-512 DQ; it gives the portable
// loop's values bit for bit (`vectorized` = false forces the portable loop: tests compare them).
void fill_uniform(uint64_t seed, uint64_t base, int64_t cols, float a, float* dst, bool vectorized = true);

}  // namespace nanovllm
