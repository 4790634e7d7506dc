// Shared by the mixture-of-experts kernels (moe_routing.cu: top-k and the grouping by expert;
// moe_gemm.cu: the grouped GEMMs and the combine): the M-tile every expert's run of rows is padded
// to, and the routing step the GEMMs read.
#pragma once
#include <cstdint>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/utils/tensor.h"

namespace nanovllm::cuda {

// Rows of one grouped-GEMM M-tile: two m16 MMA rows. Small, because at decode an expert gets a few
// tokens and the rest of its tile is padding (wasted tensor-core work, though no extra weight reads).
constexpr int kMoeBlockM = 32;
constexpr int kMoeMaxExperts = 1024;  // the align kernel's shared-memory counters

// An upper bound on the M-tiles of num_pairs (token, expert) pairs over num_experts experts, whatever
// the routing: floor(pairs / kMoeBlockM) + min(experts, pairs).
int64_t moe_max_tiles(int64_t num_pairs, int64_t num_experts);

// Groups the pairs of ids [T, k] by expert (moe_routing.cu): sorted_pairs [moe_max_tiles * kMoeBlockM],
// tile_expert [moe_max_tiles], pair_row [T * k], all I32 (see the kernel's comment).
void moe_align(const Tensor& ids, int64_t num_experts, Tensor& sorted_pairs, Tensor& tile_expert, Tensor& pair_row,
               Stream st);

}  // namespace nanovllm::cuda
