// Python's `random` module, bit for bit, for the parts nano-vllm's bench.py uses: seed(int) (MT19937
// seeded by init_by_array over the integer's 32-bit words) and randint(a, b) (rejection sampling on
// getrandbits(bit_length(b - a + 1))). So our benchmark runs exactly bench.py's workload.
#pragma once
#include <array>
#include <cstdint>

namespace nanovllm {

class PythonRandom {
 public:
  explicit PythonRandom(uint32_t seed);
  uint32_t genrand_uint32();
  uint32_t getrandbits(int k);            // 1 <= k <= 32
  int64_t randint(int64_t a, int64_t b);  // inclusive, b - a + 1 < 2^32

 private:
  std::array<uint32_t, 624> mt_{};
  int mti_ = 625;
};

}  // namespace nanovllm
