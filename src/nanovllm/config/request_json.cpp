#include "nanovllm/config/request_json.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/json_depth.h"

namespace nanovllm {

namespace {

template <class Json>
const Json* field(const Json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const std::string& name, const char* want) {
  throw InvalidRequest(name, "'" + name + "' must be " + want);
}

template <class Json>
double number(const Json& j, const char* name) {
  if (!j.is_number()) wrong_type(name, "a number");
  return j.template get<double>();
}

// {"token id as a string": bias}: the bias clamped to [-100, 100] as vLLM's OpenAI layer does; ids
// past the vocabulary are refused by the engine, which knows its size.
template <class Json>
void read_logit_bias(const Json& v, SamplingParams& sp) {
  if (!v.is_object()) wrong_type("logit_bias", "an object mapping token ids to biases");
  std::vector<std::pair<int32_t, float>> biases;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& key = it.key();
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (key.empty() || used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
      throw InvalidRequest("logit_bias", "Found token_id `" + key +
                                             "` in logit_bias but token_id must be an integer or string "
                                             "representing an integer");
    const double bias = number(*it, "logit_bias");
    biases.emplace_back(int32_t(id), float(std::min(100.0, std::max(-100.0, bias))));
  }
  sp.logit_bias = std::move(biases);
}

// Builds an ordered_json in time linear in the text. nlohmann's own parser inserts each key with
// ordered_map's linear search for a duplicate, so an object of n keys costs n^2 / 2 string
// compares: a 2 MB logit_bias of 150,000 entries took ~40 s of CPU. Here objects past a few keys
// get a hash index. Duplicate keys keep their first place and their last value, as nlohmann's do.
class OrderedJsonBuilder : public nlohmann::json_sax<nlohmann::ordered_json> {
 public:
  using J = nlohmann::ordered_json;
  explicit OrderedJsonBuilder(J& root) : root_(root) {}

  bool null() override { return put(J(nullptr)); }
  bool boolean(bool v) override { return put(J(v)); }
  bool number_integer(number_integer_t v) override { return put(J(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(J(v)); }
  bool number_float(number_float_t v, const string_t&) override { return put(J(v)); }
  bool string(string_t& v) override { return put(J(std::move(v))); }
  bool binary(binary_t& v) override { return put(J::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(J::object()); }
  bool start_array(std::size_t) override { return open(J::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    auto& items = static_cast<Items&>(f.value->get_ref<J::object_t&>());
    constexpr size_t kIndexFrom = 16;  // below it, a linear search is cheaper than hashing
    if (!f.index && items.size() >= kIndexFrom) {
      f.index.emplace();
      for (size_t i = 0; i < items.size(); ++i) f.index->emplace(items[i].first, i);
    }
    size_t at = items.size();
    if (f.index) {
      at = f.index->try_emplace(k, items.size()).first->second;
    } else {
      for (size_t i = 0; i < items.size(); ++i)
        if (items[i].first == k) at = i;
    }
    if (at == items.size()) items.emplace_back(std::move(k), J());
    slot_ = &items[at].second;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override { throw e; }

 private:
  using Items = J::object_t::Container;
  struct Frame {
    J* value;
    std::optional<std::unordered_map<std::string, size_t>> index;  // objects past kIndexFrom keys
  };
  // Where the next value goes: the root, the end of the open array, or the slot of the last key.
  J* place(J&& v) {
    J* at = &root_;
    if (!stack_.empty() && stack_.back().value->is_array()) {
      auto& a = stack_.back().value->get_ref<J::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    if (!stack_.empty()) at = slot_;
    *at = std::move(v);
    return at;
  }
  bool put(J&& v) {
    place(std::move(v));
    return true;
  }
  bool open(J&& container) {
    stack_.push_back({place(std::move(container)), std::nullopt});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  J& root_;
  std::vector<Frame> stack_;
  J* slot_ = nullptr;
};

}  // namespace

template <class Json>
Json parse_request_json(std::string_view text) {
  // nlohmann's lexer takes a NUL byte for the end of the input and would ignore what follows;
  // JSON text never holds a raw NUL (in a string it is a control character to escape).
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw InvalidRequest("", "not valid JSON: a NUL byte at offset " + std::to_string(nul));
  if (const size_t deep = find_json_too_deep(text, kMaxRequestJsonDepth); deep != std::string_view::npos)
    throw InvalidRequest("", "nested deeper than " + std::to_string(kMaxRequestJsonDepth) +
                                 " levels of arrays and objects (byte offset " + std::to_string(deep) + ")");
  try {
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      Json j;
      OrderedJsonBuilder builder(j);
      Json::sax_parse(text, &builder);
      return j;
    } else {
      return Json::parse(text);
    }
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw InvalidRequest("", std::string("not valid JSON: ") + e.what());
  }
}

template <class Json>
int64_t request_integer(const Json& v, const std::string& param) {
  if (!v.is_number_integer()) wrong_type(param, "an integer");
  if (v.is_number_unsigned() && v.template get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw InvalidRequest(param, "'" + param + "' is out of range (" + v.dump() + ")");
  return v.template get<int64_t>();
}

template <class Json>
void read_sampling_fields(const Json& j, SamplingParams& sp) {
  if (!j.is_object()) throw InvalidRequest("", "the request must be a JSON object");
  if (auto* v = field(j, "temperature")) sp.temperature = float(number(*v, "temperature"));
  if (auto* v = field(j, "top_p")) sp.top_p = float(number(*v, "top_p"));
  if (auto* v = field(j, "min_p")) sp.min_p = float(number(*v, "min_p"));
  if (auto* v = field(j, "top_k")) {
    const int64_t k = request_integer(*v, "top_k");
    if (k < -1 || k > (1 << 30)) throw InvalidRequest("top_k", "top_k must be -1, 0 or positive");
    sp.top_k = int(k);
  }
  if (auto* v = field(j, "seed")) sp.seed = uint64_t(request_integer(*v, "seed"));
  // max_completion_tokens: OpenAI's newer name, read when max_tokens is absent.
  const char* max_name = field(j, "max_tokens") ? "max_tokens" : "max_completion_tokens";
  if (auto* v = field(j, max_name)) {
    const int64_t m = request_integer(*v, max_name);
    if (m <= 0 || m > (1 << 30))
      throw InvalidRequest(max_name, std::string(max_name) + " must be at least 1 (got " + std::to_string(m) + ")");
    sp.max_tokens = int(m);
  }
  if (auto* v = field(j, "ignore_eos")) {
    if (!v->is_boolean()) wrong_type("ignore_eos", "a boolean");
    sp.ignore_eos = v->template get<bool>();
  }
  if (auto* v = field(j, "skip_special_tokens")) {
    if (!v->is_boolean()) wrong_type("skip_special_tokens", "a boolean");
    sp.skip_special_tokens = v->template get<bool>();
  }
  if (auto* v = field(j, "include_stop_str_in_output")) {
    if (!v->is_boolean()) wrong_type("include_stop_str_in_output", "a boolean");
    sp.include_stop_str_in_output = v->template get<bool>();
  }
  if (auto* v = field(j, "stop")) {
    std::vector<std::string> stop;
    if (v->is_string()) {
      stop.push_back(v->template get<std::string>());
    } else if (v->is_array()) {
      for (auto& s : *v) {
        if (!s.is_string()) wrong_type("stop", "a string or a list of strings");
        stop.push_back(s.template get<std::string>());
      }
    } else {
      wrong_type("stop", "a string or a list of strings");
    }
    sp.stop = std::move(stop);  // builds the stop strings' automaton here, off the engine thread
  }
  if (auto* v = field(j, "stop_token_ids")) {
    if (!v->is_array()) wrong_type("stop_token_ids", "a list of integers");
    std::vector<int32_t> ids;
    for (auto& t : *v) {
      const int64_t id = request_integer(t, "stop_token_ids");
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        throw InvalidRequest("stop_token_ids", "stop_token_ids: token id " + std::to_string(id) + " is out of range");
      ids.push_back(int32_t(id));
    }
    sp.stop_token_ids = std::move(ids);
  }
  if (auto* v = field(j, "presence_penalty")) sp.presence_penalty = float(number(*v, "presence_penalty"));
  if (auto* v = field(j, "frequency_penalty")) sp.frequency_penalty = float(number(*v, "frequency_penalty"));
  if (auto* v = field(j, "repetition_penalty")) sp.repetition_penalty = float(number(*v, "repetition_penalty"));
  if (auto* v = field(j, "min_tokens")) {
    const int64_t m = request_integer(*v, "min_tokens");
    if (m < 0 || m > (1 << 30))
      throw InvalidRequest("min_tokens",
                           "min_tokens must be greater than or equal to 0, got " + std::to_string(m) + ".");
    sp.min_tokens = int(m);
  }
  if (auto* v = field(j, "priority")) {  // vLLM's; the engine refuses non-zero under fcfs
    const int64_t p = request_integer(*v, "priority");
    if (p < std::numeric_limits<int32_t>::min() || p > std::numeric_limits<int32_t>::max())
      throw InvalidRequest("priority", "priority " + std::to_string(p) + " is out of range");
    sp.priority = int(p);
  }
  if (auto* v = field(j, "logit_bias")) read_logit_bias(*v, sp);
  if (auto* v = field(j, "allowed_token_ids")) {
    if (!v->is_array()) wrong_type("allowed_token_ids", "a list of integers");
    if (v->empty()) throw InvalidRequest("allowed_token_ids", "allowed_token_ids is not None and empty!");
    std::vector<int32_t> ids;
    for (auto& t : *v) {
      const int64_t id = request_integer(t, "allowed_token_ids");
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        throw InvalidRequest("allowed_token_ids", "allowed_token_ids contains out-of-vocab token id!");
      ids.push_back(int32_t(id));
    }
    sp.allowed_token_ids = std::move(ids);
  }
  if (auto* v = field(j, "bad_words")) {
    if (!v->is_array()) wrong_type("bad_words", "a list of strings");
    std::vector<std::string> words;
    for (auto& w : *v) {
      if (!w.is_string()) wrong_type("bad_words", "a list of strings");
      words.push_back(w.template get<std::string>());
    }
    sp.bad_words = std::move(words);
  }
  sp.validate();
}

#define NANOVLLM_REQUEST_JSON(Json)                                        \
  template Json parse_request_json<Json>(std::string_view);                \
  template int64_t request_integer<Json>(const Json&, const std::string&); \
  template void read_sampling_fields<Json>(const Json&, SamplingParams&);
NANOVLLM_REQUEST_JSON(nlohmann::json)
NANOVLLM_REQUEST_JSON(nlohmann::ordered_json)
#undef NANOVLLM_REQUEST_JSON

}  // namespace nanovllm
