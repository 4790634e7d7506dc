// The drafter of a --speculative-config (drafter.h).
#include "nanovllm/spec/drafter.h"

#include "nanovllm/spec/ngram_drafter.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& cfg) {
  if (cfg.method == "ngram")
    return std::make_unique<NgramDrafter>(cfg.num_speculative_tokens, cfg.prompt_lookup_min, cfg.prompt_lookup_max);
  throw UserError("--speculative-config: method '" + cfg.method + "' is not implemented yet (available: ngram)");
}

}  // namespace nanovllm
