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

#include "nanovllm/config/hf_hub.h"
#include "nanovllm/config/request_json.h"
#include "nanovllm/config/settings.h"
#include "nanovllm/config/structured_request.h"
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

py::dict output_dict(const RequestOutput& o, bool with_details) {
  py::dict d;
  d["text"] = o.text;
  d["token_ids"] = o.token_ids;
  if (with_details) {
    d["request_id"] = o.request_id;
    d["finish_reason"] = finish_reason_str(o.finish_reason);
  }
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

void bind_sampling_params(py::module_& m) {
  py::class_<SamplingParams>(m, "SamplingParams")
      .def(py::init<>())
      .def_readwrite("temperature", &SamplingParams::temperature)
      .def_readwrite("top_k", &SamplingParams::top_k)
      .def_readwrite("top_p", &SamplingParams::top_p)
      .def_readwrite("min_p", &SamplingParams::min_p)
      .def_readwrite("seed", &SamplingParams::seed)
      .def_readwrite("max_tokens", &SamplingParams::max_tokens)
      .def_readwrite("ignore_eos", &SamplingParams::ignore_eos)
      .def_readwrite("stop_token_ids", &SamplingParams::stop_token_ids)
      .def_readwrite("stop", &SamplingParams::stop)
      .def_readwrite("skip_special_tokens", &SamplingParams::skip_special_tokens)
      .def_readwrite("include_stop_str_in_output", &SamplingParams::include_stop_str_in_output)
      .def_readwrite("presence_penalty", &SamplingParams::presence_penalty)
      .def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_readwrite("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_readwrite("logit_bias", &SamplingParams::logit_bias)
      .def_readwrite("min_tokens", &SamplingParams::min_tokens)
      .def_readwrite("structured_outputs", &SamplingParams::structured_outputs)
      .def("validate", &SamplingParams::validate);
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
            for (auto& o : outs) l.append(output_dict(o, false));
            return l;
          },
          py::arg("prompts"), py::arg("params"), py::arg("progress"))
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
             for (auto& o : done) l.append(output_dict(o, true));
             // nano-vllm's count: the tokens of a prefill step, minus the sequences of a decode step.
             const int64_t n = r.is_prefill ? r.num_tokens : -r.num_tokens;
             return py::make_tuple(l, n);
           })
      .def("has_unfinished", [](const PyLLM& llm) { return llm.has_unfinished(); })
      .def("abort_request", [](PyLLM& llm, int64_t id) { llm.abort_request(id); })
      .def("encode", [](const PyLLM& llm, const std::string& text) { return llm.require_tokenizer().encode(text); })
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
  bind_llm(m);
  m.def("preset_names", &preset_names);
}
