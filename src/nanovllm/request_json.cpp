#include "nanovllm/request_json.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {
using nlohmann::json;

namespace {

const json* field(const json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const char* name, const char* want) {
  throw InvalidRequest(name, std::string("'") + name + "' must be " + want);
}

double number(const json& j, const char* name) {
  if (!j.is_number()) wrong_type(name, "a number");
  return j.get<double>();
}

int64_t integer(const json& j, const char* name) {
  if (!j.is_number_integer()) wrong_type(name, "an integer");
  return j.get<int64_t>();
}

}  // namespace

void read_sampling_fields(const json& j, SamplingParams& sp) {
  if (!j.is_object()) throw InvalidRequest("", "the request must be a JSON object");
  if (auto* v = field(j, "temperature")) sp.temperature = float(number(*v, "temperature"));
  if (auto* v = field(j, "top_p")) sp.top_p = float(number(*v, "top_p"));
  if (auto* v = field(j, "min_p")) sp.min_p = float(number(*v, "min_p"));
  if (auto* v = field(j, "top_k")) {
    const int64_t k = integer(*v, "top_k");
    if (k < -1 || k > (1 << 30)) throw InvalidRequest("top_k", "top_k must be -1, 0 or positive");
    sp.top_k = int(k);
  }
  if (auto* v = field(j, "seed")) sp.seed = uint64_t(integer(*v, "seed"));
  if (auto* v = field(j, "max_tokens")) {
    const int64_t m = integer(*v, "max_tokens");
    if (m <= 0 || m > (1 << 30)) throw InvalidRequest("max_tokens", "max_tokens must be at least 1 (got " + std::to_string(m) + ")");
    sp.max_tokens = int(m);
  }
  if (auto* v = field(j, "ignore_eos")) {
    if (!v->is_boolean()) wrong_type("ignore_eos", "a boolean");
    sp.ignore_eos = v->get<bool>();
  }
  if (auto* v = field(j, "skip_special_tokens")) {
    if (!v->is_boolean()) wrong_type("skip_special_tokens", "a boolean");
    sp.skip_special_tokens = v->get<bool>();
  }
  if (auto* v = field(j, "stop")) {
    sp.stop.clear();
    if (v->is_string()) {
      sp.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (auto& s : *v) {
        if (!s.is_string()) wrong_type("stop", "a string or a list of strings");
        sp.stop.push_back(s.get<std::string>());
      }
    } else {
      wrong_type("stop", "a string or a list of strings");
    }
  }
  if (auto* v = field(j, "stop_token_ids")) {
    if (!v->is_array()) wrong_type("stop_token_ids", "a list of integers");
    sp.stop_token_ids.clear();
    for (auto& t : *v) sp.stop_token_ids.push_back(int32_t(integer(t, "stop_token_ids")));
  }
  sp.validate();
}

}  // namespace nanovllm
