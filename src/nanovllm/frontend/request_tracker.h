// The one request tracker of every front end (LLM and so the CLI and the Python package, the
// server's engine loop): it owns the live requests of an LLMEngine between their add and their
// end, and turns each engine step into per-request output events. Per request it keeps
//   - the output processor (detokenization, stop strings, reasoning and tool-call parsers), and
//     aborts the request in the engine when a stop string ends it (the engine knows token ids only);
//   - the n > 1 choices: choice 0 goes in at once, choices 1.. (seed + j, as vLLM's parallel
//     sampling) once choice 0's prompt is computed, so that they read its KV blocks from the
//     prefix cache instead of computing them again;
//   - its timings: arrival, first scheduled, first and last token (metrics and request logs).
// A request that does not stream (LLM::generate) gets one event, at its end, and its text is
// decoded once then unless stop strings need it token by token: the engine loop pays nothing per
// token for text (nano-vllm decodes at the end too).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/output/output_processor.h"
#include "nanovllm/output/step_events.h"

namespace nanovllm {

using TrackerClock = std::chrono::steady_clock;

// When a choice reached each phase; unset (the epoch) until reached.
struct RequestTimes {
  TrackerClock::time_point arrival, scheduled, first_token, last_token;
};

// One choice at its end or abort: what metrics and request logs record.
struct ChoiceSummary {
  int64_t request_id = 0;
  int choice = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  RequestTimes times;
};

// What one step brought a choice. Streaming choices get one per new token and one at their end;
// the others only the one at their end.
struct RequestEvent {
  int64_t request_id = 0;                      // as add() returned it
  int choice = 0;                              // 0..n-1
  std::string text;                            // streaming: the new content (all of it is in output.text at the end)
  std::string reasoning;                       // new reasoning text (reasoning parser)
  std::vector<output::ToolCall> tool_calls;    // calls completed now (tool parser)
  std::vector<int32_t> token_ids;              // streaming: the step's new token, if any
  std::vector<TokenLogprobs> logprobs;         // of token_ids, when the request asked
  std::vector<TokenLogprobs> prompt_logprobs;  // with the first token, when the request asked
  double token_gap_s = 0;                    // with a token: seconds since the one before (since arrival for the first)
  FinishReason finish = FinishReason::None;  // set on the choice's last event
  StopReason stop_reason;                    // with `finish`: the stop string or stop token id (vLLM's)
  bool called_tools = false;                 // with `finish`: the choice produced tool calls
  std::string error;                         // the choice failed (it has ended; nothing more comes)
  RequestOutput
      output;  // with `finish`: the whole output (prompt and completion ids, text; logprobs when not streamed)
  ChoiceSummary summary;  // the choice so far (with every event of a streaming choice, and at the end)
};

// One step of the tracker: the engine's step result (its statistics included), the choices that
// went into the engine in it (n > 1 siblings), and the events of the step.
struct TrackerStep {
  StepResult engine;
  std::vector<ChoiceSummary> added;
  std::vector<RequestEvent> events;
};

class RequestTracker {
 public:
  struct Options {
    bool stream = true;                  // an event per token (text deltas); false: one at the end
    output::OutputParsers parsers;       // reasoning/tool-call parsing of the text (chat)
    TrackerClock::time_point arrival{};  // unset: now
  };

  // `engine` and `tok` (null: token ids only, no text) must outlive the tracker.
  RequestTracker(LLMEngine& engine, const Tokenizer* tok) : engine_(engine), tok_(tok) {}

  // Queues a request of sp.n choices (validated; throws InvalidRequest) and returns its id, the
  // engine id of choice 0. Choices 1.. go into the engine later (TrackerStep::added).
  int64_t add(std::vector<int32_t> prompt, const SamplingParams& sp, const Options& opts);
  // Ends every choice of request `id` in the engine (its KV blocks freed); returns the summaries
  // of the choices that were in the engine (none for an id that is not live).
  std::vector<ChoiceSummary> abort(int64_t id);
  // Steps the engine and routes its tokens.
  TrackerStep step();

  bool has_unfinished() const { return engine_.has_unfinished(); }
  size_t num_live_choices() const { return live_.size(); }

  // Choice j of a request of n parallel samples: seed + j when a seed is given (vLLM's
  // ParentRequest._get_child_sampling_params); the prompt logprobs come with choice 0 only.
  static SamplingParams choice_params(const SamplingParams& sp, int j);

 private:
  // A choice of n > 1 waiting for choice 0's prompt to be in the prefix cache.
  struct Sibling {
    int choice = 0;
    SamplingParams params;
  };
  // One choice in the engine.
  struct Live {
    int64_t request_id = 0;
    int choice = 0;
    bool stream = true;
    output::OutputParsers parsers;
    std::unique_ptr<output::OutputProcessor> out;  // streaming or stop strings; else text at the end
    std::vector<int32_t> prompt;                   // for the output and the siblings
    std::vector<int32_t> tokens;
    bool wants_logprobs = false;
    std::vector<TokenLogprobs> logprobs, prompt_logprobs;  // not streamed: for the output at the end
    bool detokenize = true;
    bool skip_special_tokens = true;
    bool include_stop_str_in_output = false;
    RequestTimes times;
    std::vector<Sibling> siblings;  // choice 0 of n > 1, until its first token
  };

  int64_t add_choice(std::vector<int32_t> prompt, const SamplingParams& sp, int64_t request_id, int choice,
                     const Options& opts);
  void add_siblings(Live& first, TrackerStep& out);
  // Routes one engine event of a live choice; false when the choice ended.
  bool route(std::map<int64_t, Live>::iterator it, const output::TokenEvent& e, TrackerClock::time_point now,
             TrackerStep& out);
  void finish_choice(Live& l, RequestEvent& ev, FinishReason why, const RequestOutput* engine_output, bool with_token);
  std::string final_text(const std::vector<int32_t>& token_ids, const Live& l, bool stop_token) const;
  static ChoiceSummary summary_of(const Live& l);
  // vLLM's bad_words -> token sequences (each word alone and after a space), by tok_.
  void tokenize_bad_words(SamplingParams& sp) const;

  LLMEngine& engine_;
  const Tokenizer* tok_;
  std::map<int64_t, Live> live_;  // engine id -> choice
};

}  // namespace nanovllm
