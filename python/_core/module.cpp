// nanovllm._core: the C++ engine for the Python package (python/nanovllm wraps it in nano-vllm's
// API and checks keywords). The GIL is released while the engine loads and runs; between steps
// it is taken back briefly to check for signals, so Ctrl-C ends a generate with
// KeyboardInterrupt (its requests aborted). UserError and its kinds become ValueError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <variant>

#include "nanovllm/config/generation_defaults.h"
#include "nanovllm/config/hf_hub.h"
#include "nanovllm/config/request_json.h"
#include "nanovllm/config/settings.h"
#include "nanovllm/config/structured_request.h"
#include "nanovllm/frontend/chat_messages.h"
#include "nanovllm/frontend/llm.h"
#include "nanovllm/frontend/tensor_parallel_start.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/version.h"

namespace py = pybind11;
using namespace nanovllm;

namespace {

using PromptArg = std::variant<std::string, std::vector<int32_t>>;

Prompt to_prompt(const PromptArg& p) {
  if (const auto* s = std::get_if<std::string>(&p)) return Prompt::of_text(*s);
  const auto& ids = std::get<std::vector<int32_t>>(p);
  if (ids.empty()) throw InvalidRequest("prompt", "the prompt is empty");
  return Prompt::of_ids(ids);
}

// Runs between engine steps with the GIL released: a pending signal (Ctrl-C) raises its
// Python exception through the engine loop.
void check_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// One step's logprobs as vLLM's dict entries: [(token_id, logprob, rank, decoded_token)], the
// sampled (or prompt) token first, then the top N by rank; token texts are each id decoded alone,
// special tokens kept (as vLLM's logprobs detokenization; "" without a tokenizer).
py::list logprob_entries(const TokenLogprobs& lp, int32_t token, const Tokenizer* tok) {
  auto text = [&](int32_t id) { return tok && id < tok->vocab_size() ? tok->decode({id}, false) : std::string(); };
  py::list l;
  l.append(py::make_tuple(token, lp.logprob, lp.rank, text(token)));
  for (size_t k = 0; k < lp.top.size(); ++k)
    l.append(py::make_tuple(lp.top[k].first, lp.top[k].second, int(k) + 1, text(lp.top[k].first)));
  return l;
}

py::object logprobs_list(const std::vector<TokenLogprobs>& lps, const std::vector<int32_t>& ids, size_t offset,
                         const Tokenizer* tok) {
  py::list l;
  for (size_t i = 0; i < lps.size() && offset + i < ids.size(); ++i)
    l.append(logprob_entries(lps[i], ids[offset + i], tok));
  return l;
}

// A finished choice for the Python layer (python/nanovllm/outputs.py builds vLLM's RequestOutput);
// logprobs only when `with_logprobs` (the request asked: an empty list is then an answer).
py::dict output_dict(const RequestOutput& o, const Tokenizer* tok, bool with_logprobs, bool with_prompt_logprobs) {
  py::dict d;
  d["request_id"] = o.request_id;
  d["index"] = o.index;
  d["prompt_token_ids"] = o.prompt_token_ids;
  d["token_ids"] = o.token_ids;
  d["text"] = o.text;
  d["finish_reason"] = finish_reason_str(o.finish_reason);
  d["stop_reason"] = o.stop_reason;  // None, a stop token id or a stop string (pybind11 converts the variant)
  d["num_cached_tokens"] = o.num_cached_prompt_tokens;
  d["logprobs"] = with_logprobs ? logprobs_list(o.logprobs, o.token_ids, 0, tok) : py::none();
  d["prompt_logprobs"] =
      with_prompt_logprobs ? logprobs_list(o.prompt_logprobs, o.prompt_token_ids, 1, tok) : py::none();
  return d;
}

// Tensor parallelism: the node's other ranks are `worker_program` (the nanovllm executable, run
// as `generate` workers, as the CLI starts them); none for tensor_parallel_size 1.
std::unique_ptr<LocalLauncher> start_ranks(EngineConfig& cfg, const std::string& worker_program) {
  if (cfg.tensor_parallel_size == 1) return nullptr;
  settle_model_dir(cfg);  // the workers load rank 0's snapshot of a Hugging Face id
  if (worker_program.empty() || access(worker_program.c_str(), X_OK) != 0)
    throw UserError("tensor_parallel_size " + std::to_string(cfg.tensor_parallel_size) +
                    " needs the nanovllm executable for the other ranks (not found: '" + worker_program + "')");
  std::vector<std::string> cmd{worker_program,
                               "generate",
                               "--model",
                               cfg.model_path(),
                               "--device",
                               device_choice_name(cfg.device),
                               "--tensor-parallel-size",
                               std::to_string(cfg.tensor_parallel_size),
                               "--load-format",
                               cfg.load_dummy ? "dummy" : "auto"};
  if (cfg.num_threads > 0) cmd.insert(cmd.end(), {"--threads", std::to_string(cfg.num_threads)});
  return start_tensor_parallel(cfg, true, std::move(cmd)).launcher;
}

struct Ranks {
  std::unique_ptr<LocalLauncher> launcher;
};

// A Python LLM: the other ranks (a base, so started before the engine, which waits for them, and
// stopped after it, which says goodbye to them), then the engine.
struct PyLLM : Ranks, LLM {
  PyLLM(EngineConfig cfg, const std::string& tokenizer_dir, bool skip_tokenizer_init, const std::string& worker_program)
      : Ranks{start_ranks(cfg, worker_program)}, LLM(std::move(cfg), tokenizer_dir, skip_tokenizer_init) {}
};

py::object to_python(const SettingValue& v) {
  struct {
    py::object operator()(std::monostate) const { return py::none(); }
    py::object operator()(bool b) const { return py::bool_(b); }
    py::object operator()(int64_t i) const { return py::int_(i); }
    py::object operator()(double d) const { return py::float_(d); }
    py::object operator()(const std::string& s) const { return py::str(s); }
  } convert;
  return std::visit(convert, v);
}

const char* type_name(SettingType t) {
  switch (t) {
    case SettingType::Bool: return "bool";
    case SettingType::OptionalBool: return "optional_bool";
    case SettingType::Int: return "int";
    case SettingType::Float: return "float";
    case SettingType::Text: return "str";
    case SettingType::Choice: return "choice";
  }
  return "?";
}

// The settings table (config/settings.h) as dicts: python/nanovllm/config.py builds LLM(...)'s
// keywords from it.
py::list settings_table() {
  py::list l;
  for (const Setting& s : engine_settings()) {
    py::dict d;
    d["name"] = s.name;
    d["type"] = type_name(s.type);
    d["flags"] = s.flags;
    d["keywords"] = s.keywords;
    d["python_none"] = s.python_none;
    d["choices"] = s.choices;
    d["default"] = s.default_text();
    d["help"] = s.help;
    l.append(d);
  }
  return l;
}

// EngineConfig: the model, one generic setter and getter over the settings table, and validate.
void bind_engine_config(py::module_& m) {
  py::class_<EngineConfig>(m, "EngineConfig")
      .def(py::init<>())
      .def_readwrite("model", &EngineConfig::model)
      // A setting by its table name; a bad value is a ValueError naming its flag.
      .def("set", [](EngineConfig& c, const std::string& name, const SettingValue& v) { find_setting(name).set(c, v); })
      .def("get", [](const EngineConfig& c, const std::string& name) { return to_python(find_setting(name).get(c)); })
      // The CLI's NANOVLLM_* environment overrides of the kernel options (before kernel_options).
      .def("apply_kernel_env_overrides",
           [](EngineConfig& c) { apply_kernel_env_overrides(c.kernels, [](const char* n) { return std::getenv(n); }); })
      .def("validate", &EngineConfig::validate);
  m.def("settings", &settings_table);
  m.def("preset_tokenizer_name", &preset_tokenizer_name);
  m.def("find_tokenizer_dir", [](const std::string& model, const std::string& explicit_dir) {
    EngineConfig c;
    c.model = model;
    return find_tokenizer_dir(c, explicit_dir);
  });
}

// A Shared list of SamplingParams (config/shared_value.h) as a Python attribute: read as a list,
// set whole.
const std::vector<std::string>& as_list(const StopStrings& s) { return s.list(); }
template <class T>
const T& as_list(const T& v) {
  return v;
}
template <class T>
void def_shared(py::class_<SamplingParams>& c, const char* name, Shared<T> SamplingParams::*field) {
  using List = std::decay_t<decltype(as_list(std::declval<const T&>()))>;
  c.def_property(
      name, [field](const SamplingParams& sp) { return as_list((sp.*field).get()); },
      [field](SamplingParams& sp, List v) { sp.*field = std::move(v); });
}

void bind_sampling_params(py::module_& m) {
  py::class_<SamplingParams> c(m, "SamplingParams");
  c.def(py::init<>())
      .def_readwrite("temperature", &SamplingParams::temperature)
      .def_readwrite("top_k", &SamplingParams::top_k)
      .def_readwrite("top_p", &SamplingParams::top_p)
      .def_readwrite("min_p", &SamplingParams::min_p)
      .def_readwrite("seed", &SamplingParams::seed)
      .def_readwrite("max_tokens", &SamplingParams::max_tokens)
      .def_readwrite("ignore_eos", &SamplingParams::ignore_eos)
      .def_readwrite("skip_special_tokens", &SamplingParams::skip_special_tokens)
      .def_readwrite("include_stop_str_in_output", &SamplingParams::include_stop_str_in_output)
      .def_readwrite("presence_penalty", &SamplingParams::presence_penalty)
      .def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_readwrite("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_readwrite("min_tokens", &SamplingParams::min_tokens)
      .def_readwrite("priority", &SamplingParams::priority)
      .def("copy", [](const SamplingParams& s) { return s; })
      .def_readwrite("structured_outputs", &SamplingParams::structured_outputs)
      .def_readwrite("n", &SamplingParams::n)
      .def_readwrite("logprobs", &SamplingParams::logprobs)
      .def_readwrite("prompt_logprobs", &SamplingParams::prompt_logprobs)
      .def_readwrite("detokenize", &SamplingParams::detokenize)
      .def("validate", &SamplingParams::validate);
  def_shared(c, "stop_token_ids", &SamplingParams::stop_token_ids);
  def_shared(c, "stop", &SamplingParams::stop);
  def_shared(c, "logit_bias", &SamplingParams::logit_bias);
  def_shared(c, "allowed_token_ids", &SamplingParams::allowed_token_ids);
  def_shared(c, "bad_words", &SamplingParams::bad_words);
  py::class_<StructuredOutputs>(m, "StructuredOutputs")
      .def(py::init<>())
      .def_property_readonly("kind", [](const StructuredOutputs& s) { return structured_kind_name(s.kind); })
      .def_readonly("text", &StructuredOutputs::text)
      .def_readonly("choices", &StructuredOutputs::choices)
      .def_readonly("any_whitespace", &StructuredOutputs::any_whitespace)
      .def_readonly("start_after_token", &StructuredOutputs::start_after_token);
  // The Python layer's StructuredOutputsParams / GuidedDecodingParams as a request's JSON ->
  // StructuredOutputs, by the server's own reader (config/structured_request.h), over the engine's
  // structured_outputs_config (JSON).
  m.def("read_structured_outputs", [](const std::string& request, const std::string& config) {
    const auto cfg = StructuredOutputsConfig::parse(config, "structured_outputs_config");
    return read_structured_fields(parse_request_json<nlohmann::ordered_json>(request), cfg).spec;
  });
}

// The tokenizer behind LLM.get_tokenizer() (python/nanovllm/tokenizer.py gives it Hugging Face's
// interface); it lives as long as its LLM.
void bind_tokenizer(py::module_& m) {
  py::class_<Tokenizer>(m, "Tokenizer")
      .def("encode", py::overload_cast<std::string_view, bool>(&Tokenizer::encode, py::const_), py::arg("text"),
           py::arg("add_special_tokens") = true)
      .def("decode", &Tokenizer::decode, py::arg("token_ids"), py::arg("skip_special_tokens") = false)
      .def("id_to_token", &Tokenizer::id_to_token)
      .def("token_to_id", &Tokenizer::token_to_id)
      .def("is_special", &Tokenizer::is_special)
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
      .def_property_readonly("base_vocab_size", &Tokenizer::base_vocab_size)
      .def_property_readonly("bos_token", &Tokenizer::bos_token)
      .def_property_readonly("eos_token", &Tokenizer::eos_token)
      .def_property_readonly("chat_template", &Tokenizer::chat_template);
}

// A streaming step's events for python/nanovllm/async_llm.py: the new tokens, text and logprobs of
// each choice, and its end.
py::list event_dicts(PyLLM& llm, std::vector<RequestEvent>& events) {
  py::list l;
  for (RequestEvent& ev : events) {
    py::dict d;
    d["request_id"] = ev.request_id;
    d["index"] = ev.choice;
    d["text"] = ev.text;
    d["token_ids"] = ev.token_ids;
    d["logprobs"] = logprobs_list(ev.logprobs, ev.token_ids, 0, llm.tokenizer());
    d["error"] = ev.error;
    d["finish_reason"] = finish_reason_str(ev.finish);
    d["output"] = ev.finish == FinishReason::None ? py::object(py::none())
                                                  : py::object(output_dict(ev.output, llm.tokenizer(), false, false));
    // With the first token, when asked: the prompt's (tokens 1..), as (logprob, rank, top) to be
    // paired with the prompt ids the caller has.
    py::list pl;
    for (auto& lp : ev.prompt_logprobs) pl.append(py::make_tuple(lp.logprob, lp.rank, lp.top));
    d["prompt_logprobs"] = pl;
    l.append(d);
  }
  return l;
}

void bind_llm(py::module_& m) {
  py::class_<PyLLM>(m, "LLM")
      .def(py::init([](EngineConfig cfg, const std::string& tokenizer_dir, bool skip_tokenizer_init,
                       const std::string& worker_program) {
             py::gil_scoped_release nogil;
             return std::make_unique<PyLLM>(std::move(cfg), tokenizer_dir, skip_tokenizer_init, worker_program);
           }),
           py::arg("config"), py::arg("tokenizer_dir") = "", py::arg("skip_tokenizer_init") = false,
           py::arg("worker_program") = "")
      .def(
          "generate",
          [](PyLLM& llm, const std::vector<PromptArg>& prompts, const std::vector<SamplingParams>& params,
             bool progress) {
            std::vector<Prompt> ps;
            for (auto& p : prompts) ps.push_back(to_prompt(p));
            std::vector<RequestOutput> outs;
            {
              py::gil_scoped_release nogil;
              outs = llm.generate(ps, params, progress, check_signals);
            }
            py::list l;
            size_t i = 0;  // the prompt of outs[k]: each prompt has its n outputs in a row
            for (size_t k = 0; k < outs.size(); ++k) {
              const SamplingParams& sp = params[params.size() == 1 ? 0 : i];
              l.append(output_dict(outs[k], llm.tokenizer(), sp.logprobs.has_value(), sp.prompt_logprobs.has_value()));
              if (outs[k].index + 1 == sp.n) ++i;
            }
            return l;
          },
          py::arg("prompts"), py::arg("params"), py::arg("progress"))
      // Pooling models (LLM::encode / LLM::score): [(request id, prompt ids, pooled floats)] per prompt.
      .def(
          "encode_pooling",
          [](PyLLM& llm, const std::vector<PromptArg>& prompts, const std::string& task,
             std::optional<int64_t> dimensions, std::optional<bool> normalize, std::optional<bool> activation,
             bool progress) {
            std::vector<Prompt> ps;
            for (auto& p : prompts) ps.push_back(to_prompt(p));
            PoolingParams pp;
            if (task == "classify")
              pp.task = PoolingTask::Classify;
            else if (task == "score")
              pp.task = PoolingTask::Score;
            else if (task != "embed")
              throw InvalidRequest("pooling_task", "unknown pooling task '" + task + "'");
            pp.dimensions = dimensions;
            pp.normalize = normalize;
            pp.activation = activation;
            std::vector<RequestOutput> outs;
            {
              py::gil_scoped_release nogil;
              outs = llm.encode(ps, pp, progress, check_signals);
            }
            py::list l;
            for (auto& o : outs) l.append(py::make_tuple(o.request_id, o.prompt_token_ids, o.pooled));
            return l;
          },
          py::arg("prompts"), py::arg("task"), py::arg("dimensions"), py::arg("normalize"), py::arg("activation"),
          py::arg("progress"))
      .def(
          "score",
          [](PyLLM& llm, const std::vector<PromptArg>& queries, const std::vector<PromptArg>& documents,
             std::optional<bool> activation) {
            std::vector<Prompt> qs, ds;
            for (auto& p : queries) qs.push_back(to_prompt(p));
            for (auto& p : documents) ds.push_back(to_prompt(p));
            py::gil_scoped_release nogil;
            return llm.score(qs, ds, activation, check_signals);
          },
          py::arg("queries"), py::arg("documents"), py::arg("activation"))
      .def_property_readonly("pooling_tasks",
                             [](const PyLLM& llm) {
                               return llm.pooling_model() ? llm.pooling_model()->supported_tasks()
                                                          : std::vector<std::string>{};
                             })
      .def(
          "add_request",
          [](PyLLM& llm, const PromptArg& p, const SamplingParams& sp) { return llm.add_request(to_prompt(p), sp); },
          py::arg("prompt"), py::arg("params"))
      .def("step",
           [](PyLLM& llm) {
             StepResult r;
             std::vector<RequestOutput> done;
             {
               py::gil_scoped_release nogil;
               done = llm.step(&r);
             }
             py::list l;
             for (auto& o : done)
               l.append(output_dict(o, llm.tokenizer(), !o.logprobs.empty(), !o.prompt_logprobs.empty()));
             // nano-vllm's count: the tokens of a prefill step, minus the sequences of a decode step.
             const int64_t n = r.is_prefill ? r.num_tokens : -r.num_tokens;
             return py::make_tuple(l, n);
           })
      // Streaming (AsyncLLM): a request whose every token is an event of step_events().
      .def(
          "add_stream_request",
          [](PyLLM& llm, const PromptArg& p, const SamplingParams& sp) {
            std::vector<int32_t> ids = llm.to_token_ids(to_prompt(p));
            const int64_t id = llm.add_request(Prompt::of_ids(ids), sp, /*stream=*/true);
            return py::make_tuple(id, ids);
          },
          py::arg("prompt"), py::arg("params"))
      .def("step_events",
           [](PyLLM& llm) {
             TrackerStep s;
             {
               py::gil_scoped_release nogil;
               s = llm.tracker().step();
             }
             return event_dicts(llm, s.events);
           })
      .def(
          "tokenizer", [](const PyLLM& llm) { return llm.tokenizer(); }, py::return_value_policy::reference_internal)
      // messages (JSON text, as the server's body) -> (the prompt text through the model's chat
      // template or `source`, the last message's content as the template got it: text parts joined).
      .def(
          "apply_chat_template",
          [](const PyLLM& llm, const std::string& messages, const std::string& tools, bool add_generation_prompt,
             const std::string& kwargs, const std::string& source) {
            ChatTemplateInputs in;
            in.messages = chat_template_messages(nlohmann::ordered_json::parse(messages));
            if (!tools.empty()) in.tools = nlohmann::ordered_json::parse(tools);
            in.add_generation_prompt = add_generation_prompt;
            if (!kwargs.empty()) apply_chat_template_kwargs(nlohmann::ordered_json::parse(kwargs), in);
            const auto own = source.empty() ? nullptr : std::make_unique<ChatTemplate>(source);
            return py::make_tuple(llm.apply_chat_template(in, own.get()),
                                  in.messages.back()["content"].get<std::string>());
          },
          py::arg("messages"), py::arg("tools"), py::arg("add_generation_prompt"), py::arg("kwargs"),
          py::arg("chat_template"))
      // dtype (vLLM's keyword) against the backend this engine runs on (config/engine_choices.h).
      .def("check_dtype",
           [](const PyLLM& llm, const std::string& dtype) {
             check_dtype_choice(dtype,
                                llm.engine_info().device == Device::CUDA ? DeviceChoice::Cuda : DeviceChoice::Cpu);
           })
      .def_property_readonly("model_dir", [](const PyLLM& llm) { return llm.config().model_dir; })
      .def_property_readonly("max_model_len", [](const PyLLM& llm) { return llm.config().max_model_len; })
      .def_property_readonly("vocab_size", [](const PyLLM& llm) { return llm.model_config().vocab_size; })
      .def("has_unfinished", [](const PyLLM& llm) { return llm.has_unfinished(); })
      .def("abort_request", [](PyLLM& llm, int64_t id) { llm.abort_request(id); })
      .def(
          "encode",
          [](const PyLLM& llm, const std::string& text, bool add_special_tokens) {
            return llm.require_tokenizer().encode(text, add_special_tokens);
          },
          py::arg("text"), py::arg("add_special_tokens") = true)
      .def(
          "decode",
          [](const PyLLM& llm, const std::vector<int32_t>& ids, bool skip_special_tokens) {
            return llm.require_tokenizer().decode(ids, skip_special_tokens);
          },
          py::arg("token_ids"), py::arg("skip_special_tokens") = true);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "nano-vllm in C++: the engine behind the nanovllm package";
  m.attr("__version__") = kVersion;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UserError& e) {  // bad arguments, requests, model files
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  bind_engine_config(m);
  bind_sampling_params(m);
  bind_tokenizer(m);
  bind_llm(m);
  m.def("preset_names", &preset_names);
  m.def("check_dtype_name", [](const std::string& dtype) { check_dtype_choice(dtype, DeviceChoice::Auto); });
  // The generation config's sampling defaults as a dict of vLLM's names (python: LLM's
  // generation_config / override_generation_config keywords, get_default_sampling_params()).
  m.def("generation_defaults",
        [](const std::string& mode, const std::string& model_dir, const std::string& override_json) {
          return load_generation_defaults(mode, model_dir, override_json).as_json().dump();
        });
}
