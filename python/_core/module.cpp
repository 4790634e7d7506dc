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

#include "nanovllm/dist/local_ranks.h"
#include "nanovllm/engine/tensor_parallel.h"
#include "nanovllm/frontend/llm.h"
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
  check_tensor_parallel(cfg, resolve_model_config(cfg));  // before any process or GPU work
  if (worker_program.empty() || access(worker_program.c_str(), X_OK) != 0)
    throw UserError("tensor_parallel_size " + std::to_string(cfg.tensor_parallel_size) +
                    " needs the nanovllm executable for the other ranks (not found: '" + worker_program + "')");
  cfg.on_tp_peer_lost = [](const std::string& what) {  // as the CLI's rank 0: nothing to go on with
    std::fprintf(stderr, "error: %s\n", what.c_str());
    std::fflush(stderr);
    _exit(1);
  };
  std::vector<std::string> cmd{worker_program,
                               "generate",
                               "--model",
                               cfg.model,
                               "--device",
                               cfg.device,
                               "--tensor-parallel-size",
                               std::to_string(cfg.tensor_parallel_size),
                               "--load-format",
                               cfg.load_dummy ? "dummy" : "auto"};
  if (cfg.num_threads > 0) cmd.insert(cmd.end(), {"--threads", std::to_string(cfg.num_threads)});
  return start_local_ranks(cfg, std::move(cmd));
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

void bind_engine_config(py::module_& m) {
  py::class_<EngineConfig>(m, "EngineConfig")
      .def(py::init<>())
      .def_readwrite("model", &EngineConfig::model)
      .def_readwrite("load_dummy", &EngineConfig::load_dummy)
      .def_readwrite("device", &EngineConfig::device)
      .def_readwrite("max_num_seqs", &EngineConfig::max_num_seqs)
      .def_readwrite("max_num_batched_tokens", &EngineConfig::max_num_batched_tokens)
      .def_readwrite("max_model_len", &EngineConfig::max_model_len)
      .def_readwrite("block_size", &EngineConfig::block_size)
      .def_readwrite("gpu_memory_utilization", &EngineConfig::gpu_memory_utilization)
      .def_readwrite("kv_cache_memory", &EngineConfig::kv_cache_memory)
      .def_readwrite("num_kvcache_blocks", &EngineConfig::num_kvcache_blocks)
      .def_readwrite("enforce_eager", &EngineConfig::enforce_eager)
      .def_readwrite("tensor_parallel_size", &EngineConfig::tensor_parallel_size)
      .def_readwrite("enable_prefix_caching", &EngineConfig::enable_prefix_caching)
      .def_readwrite("enable_chunked_prefill", &EngineConfig::enable_chunked_prefill)
      .def_readwrite("async_scheduling", &EngineConfig::async_scheduling)
      .def_readwrite("seed", &EngineConfig::seed)
      .def_readwrite("max_logprobs", &EngineConfig::max_logprobs)
      .def_readwrite("logprobs_mode", &EngineConfig::logprobs_mode)
      .def_readwrite("num_threads", &EngineConfig::num_threads)
      // vLLM's names in and the canonical one out; a bad value is a ValueError naming it.
      .def_property(
          "kv_cache_dtype", [](const EngineConfig& c) { return std::string(kv_cache_dtype_name(c.kv_cache_dtype)); },
          [](EngineConfig& c, const std::string& s) { c.kv_cache_dtype = parse_kv_cache_dtype(s); })
      .def_property(
          "quantization", [](const EngineConfig& c) { return std::string(quantization_name(c.quantization)); },
          [](EngineConfig& c, const std::string& s) { c.quantization = parse_quantization(s); })
      // The CLI's order: NANOVLLM_* environment overrides, then the explicit options.
      .def("apply_kernel_options",
           [](EngineConfig& c, const std::string& spec) {
             apply_kernel_env_overrides(c.kernels, [](const char* name) { return std::getenv(name); });
             if (!spec.empty()) apply_kernel_options(c.kernels, spec);
           })
      .def("validate", &EngineConfig::validate);
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
      .def("validate", &SamplingParams::validate);
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
