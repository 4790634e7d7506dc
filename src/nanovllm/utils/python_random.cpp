#include "nanovllm/utils/python_random.h"

#include <bit>

#include "nanovllm/utils/error.h"

namespace nanovllm {

// MT19937 as in CPython's _randommodule.c (init_genrand + init_by_array with a one-word key).
PythonRandom::PythonRandom(uint32_t seed) {
  mt_[0] = 19650218u;
  for (mti_ = 1; mti_ < 624; ++mti_)
    mt_[size_t(mti_)] = 1812433253u * (mt_[size_t(mti_ - 1)] ^ (mt_[size_t(mti_ - 1)] >> 30)) + uint32_t(mti_);
  const uint32_t key[1] = {seed};
  const int key_length = 1;
  int i = 1, j = 0;
  for (int k = 624; k; --k) {
    mt_[size_t(i)] =
        (mt_[size_t(i)] ^ ((mt_[size_t(i - 1)] ^ (mt_[size_t(i - 1)] >> 30)) * 1664525u)) + key[j] + uint32_t(j);
    ++i;
    ++j;
    if (i >= 624) {
      mt_[0] = mt_[623];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (int k = 623; k; --k) {
    mt_[size_t(i)] = (mt_[size_t(i)] ^ ((mt_[size_t(i - 1)] ^ (mt_[size_t(i - 1)] >> 30)) * 1566083941u)) - uint32_t(i);
    ++i;
    if (i >= 624) {
      mt_[0] = mt_[623];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  mti_ = 624;
}

uint32_t PythonRandom::genrand_uint32() {
  static constexpr uint32_t mag01[2] = {0u, 0x9908b0dfu};
  if (mti_ >= 624) {
    int kk = 0;
    for (; kk < 624 - 397; ++kk) {
      uint32_t y = (mt_[size_t(kk)] & 0x80000000u) | (mt_[size_t(kk + 1)] & 0x7fffffffu);
      mt_[size_t(kk)] = mt_[size_t(kk + 397)] ^ (y >> 1) ^ mag01[y & 1u];
    }
    for (; kk < 623; ++kk) {
      uint32_t y = (mt_[size_t(kk)] & 0x80000000u) | (mt_[size_t(kk + 1)] & 0x7fffffffu);
      mt_[size_t(kk)] = mt_[size_t(kk + 397 - 624)] ^ (y >> 1) ^ mag01[y & 1u];
    }
    uint32_t y = (mt_[623] & 0x80000000u) | (mt_[0] & 0x7fffffffu);
    mt_[623] = mt_[396] ^ (y >> 1) ^ mag01[y & 1u];
    mti_ = 0;
  }
  uint32_t y = mt_[size_t(mti_++)];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

uint32_t PythonRandom::getrandbits(int k) { return genrand_uint32() >> (32 - k); }

int64_t PythonRandom::randint(int64_t a, int64_t b) {
  const uint64_t n = uint64_t(b - a + 1);
  if (b < a || n > 0xffffffffull) throw Error("randint: unsupported range");
  const int k = int(std::bit_width(n));
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return a + int64_t(r);
}

}  // namespace nanovllm
