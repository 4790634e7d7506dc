#include "nanovllm/frontend/request_tracker.h"

#include <algorithm>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

double seconds_between(TrackerClock::time_point a, TrackerClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

SamplingParams RequestTracker::choice_params(const SamplingParams& sp, int j) {
  SamplingParams c = sp;
  c.n = 1;
  if (sp.seed) c.seed = *sp.seed + uint64_t(j);
  if (j > 0) c.prompt_logprobs.reset();  // the same prompt: a response repeats choice 0's
  return c;
}

void RequestTracker::tokenize_bad_words(SamplingParams& sp) const {
  if (sp.bad_words.empty()) return;
  if (!tok_) throw InvalidRequest("bad_words", "bad_words need the model's tokenizer, and this engine has none");
  std::vector<std::vector<int32_t>> words;
  for (const std::string& word : sp.bad_words) {
    const std::string bare = word.substr(std::min(word.find_first_not_of(" \t\n\r\f\v"), word.size()));
    std::vector<int32_t> alone = tok_->encode(bare, false);
    if (alone.empty()) continue;
    // After a space too, where that makes a different token sequence of the same length (vLLM's
    // SamplingParams.update_from_tokenizer).
    std::vector<int32_t> spaced = tok_->encode(" " + bare, false);
    const bool add_spaced = !spaced.empty() && spaced[0] != alone[0] && spaced.size() == alone.size();
    words.push_back(std::move(alone));
    if (add_spaced) words.push_back(std::move(spaced));
  }
  sp.bad_words_token_ids = std::move(words);
}

int64_t RequestTracker::add(std::vector<int32_t> prompt, const SamplingParams& params, const Options& opts) {
  Options o = opts;
  if (o.arrival == TrackerClock::time_point{}) o.arrival = TrackerClock::now();
  SamplingParams sp = params;
  tokenize_bad_words(sp);
  const int64_t id = add_choice(std::move(prompt), choice_params(sp, 0), -1, 0, o);
  for (int j = 1; j < sp.n; ++j) live_.at(id).siblings.push_back({j, choice_params(sp, j)});
  return id;
}

int64_t RequestTracker::add_choice(std::vector<int32_t> prompt, const SamplingParams& sp, int64_t request_id,
                                   int choice, const Options& opts) {
  const int64_t rid = engine_.add_request(prompt, sp);
  Live l;
  l.request_id = request_id < 0 ? rid : request_id;
  l.choice = choice;
  l.stream = opts.stream;
  l.parsers = opts.parsers;
  if ((opts.stream || !sp.stop.empty()) && sp.detokenize)
    l.out = std::make_unique<output::OutputProcessor>(tok_, sp, opts.parsers);
  l.prompt = std::move(prompt);
  l.wants_logprobs = sp.logprobs.has_value();
  l.detokenize = sp.detokenize;
  l.skip_special_tokens = sp.skip_special_tokens;
  l.include_stop_str_in_output = sp.include_stop_str_in_output;
  l.times.arrival = opts.arrival;
  live_.emplace(rid, std::move(l));
  return rid;
}

// Choice 0's prompt has been computed (its full blocks are sealed in the prefix cache): its
// siblings go in now and read those blocks instead of computing them again.
void RequestTracker::add_siblings(Live& first, TrackerStep& out) {
  std::vector<Sibling> siblings = std::move(first.siblings);
  first.siblings.clear();
  const Options opts{first.stream, first.parsers, first.times.arrival};
  for (Sibling& s : siblings) {
    try {
      const int64_t rid = add_choice(first.prompt, s.params, first.request_id, s.choice, opts);
      out.added.push_back(summary_of(live_.at(rid)));
    } catch (const std::exception& e) {  // the same prompt and parameters were accepted: not expected
      RequestEvent ev;
      ev.request_id = first.request_id;
      ev.choice = s.choice;
      ev.error = std::string("could not add a parallel sample: ") + e.what();
      out.events.push_back(std::move(ev));
    }
  }
}

std::vector<ChoiceSummary> RequestTracker::abort(int64_t id) {
  std::vector<ChoiceSummary> ended;
  // Choices 1.. went into the engine after choice 0: their engine ids are larger.
  for (auto it = live_.lower_bound(id); it != live_.end();) {
    if (it->second.request_id != id) {
      ++it;
      continue;
    }
    engine_.abort(it->first);  // frees its KV blocks
    ended.push_back(summary_of(it->second));
    it = live_.erase(it);
  }
  return ended;
}

TrackerStep RequestTracker::step() {
  TrackerStep out;
  const auto start = TrackerClock::now();
  out.engine = engine_.step();
  for (int64_t rid : out.engine.first_scheduled)
    if (auto it = live_.find(rid); it != live_.end() && it->second.times.scheduled == TrackerClock::time_point{})
      it->second.times.scheduled = start;
  const auto now = TrackerClock::now();
  for (const output::TokenEvent& e : output::step_events(out.engine)) {
    auto it = live_.find(e.request_id);
    if (it == live_.end()) continue;
    if (!route(it, e, now, out)) live_.erase(it);
  }
  return out;
}

bool RequestTracker::route(std::map<int64_t, Live>::iterator it, const output::TokenEvent& e,
                           TrackerClock::time_point now, TrackerStep& out) {
  Live& l = it->second;
  // n > 1: this choice's prompt is computed (live_ is a map: `l` and `it` stay valid).
  if (!l.siblings.empty()) add_siblings(l, out);
  RequestEvent ev;
  ev.request_id = l.request_id;
  ev.choice = l.choice;
  if (e.token >= 0) {
    ev.token_gap_s = seconds_between(l.tokens.empty() ? l.times.arrival : l.times.last_token, now);
    if (l.tokens.empty()) l.times.first_token = now;
    l.times.last_token = now;
    l.tokens.push_back(e.token);
    if (l.stream) {
      ev.token_ids = {e.token};
      if (l.wants_logprobs && e.logprobs) ev.logprobs.push_back(*e.logprobs);
    } else if (l.wants_logprobs && e.logprobs) {
      l.logprobs.push_back(*e.logprobs);
    }
  }
  if (e.prompt_logprobs) (l.stream ? ev.prompt_logprobs : l.prompt_logprobs) = *e.prompt_logprobs;
  FinishReason finish = e.finish;
  if (l.out) {
    output::OutputDelta d;
    try {
      d = l.out->push(e.token, e.finish);
    } catch (const std::exception& ex) {  // this choice's text failed; the others go on
      engine_.abort(it->first);
      ev.error = std::string("detokenization failed: ") + ex.what();
      ev.summary = summary_of(l);
      out.events.push_back(std::move(ev));
      return false;
    }
    finish = d.finish;
    if (d.stopped_by_string) engine_.abort(it->first);  // the engine does not know stop strings
    ev.text = std::move(d.text);
    ev.reasoning = std::move(d.reasoning);
    ev.tool_calls = std::move(d.tool_calls);
  }
  if (finish == FinishReason::None) {
    if (l.stream) {
      ev.summary = summary_of(l);
      out.events.push_back(std::move(ev));
    }
    return true;
  }
  finish_choice(l, ev, finish, e.finished, e.token >= 0);
  out.events.push_back(std::move(ev));
  return false;
}

// `with_token`: the engine event that ended the choice carried a token (the EOS or stop token
// when the engine ended it with "stop").
void RequestTracker::finish_choice(Live& l, RequestEvent& ev, FinishReason why, const RequestOutput* engine_output,
                                   bool with_token) {
  ev.finish = why;
  ev.called_tools = l.out && l.out->called_tools();
  ev.summary = summary_of(l);
  if (!l.stream) ev.text.clear();  // the deltas of a stop-string check; the whole text is below
  RequestOutput& o = ev.output;
  o.request_id = l.request_id;
  o.index = l.choice;
  o.finish_reason = why;
  // A stop string the output processor matched, else the engine's stop token.
  if (l.out && !l.out->matched_stop().empty())
    o.stop_reason = l.out->matched_stop();
  else if (engine_output && why == FinishReason::Stop)
    o.stop_reason = engine_output->stop_reason;
  ev.stop_reason = o.stop_reason;
  if (engine_output) {
    o.prompt_token_ids = engine_output->prompt_token_ids;
    o.token_ids = engine_output->token_ids;
    o.num_cached_prompt_tokens = engine_output->num_cached_prompt_tokens;
    o.pooled = engine_output->pooled;
  } else {  // ended on a stop string
    o.prompt_token_ids = std::move(l.prompt);
    o.token_ids = std::move(l.tokens);
  }
  if (!l.stream) {
    o.logprobs = std::move(l.logprobs);
    o.prompt_logprobs = std::move(l.prompt_logprobs);
  }
  if (l.out)
    o.text = l.out->text();
  else if (l.detokenize)
    o.text = final_text(o.token_ids, l, why == FinishReason::Stop && with_token && !o.token_ids.empty());
}

// The text of a finished choice decoded at once, as the output processor would have made it:
// the token that ended it in the engine (EOS, a stop token: `stop_token`) is not text unless
// asked for, and ids past the tokenizer's vocabulary (a padded embedding) have none.
std::string RequestTracker::final_text(const std::vector<int32_t>& token_ids, const Live& l, bool stop_token) const {
  if (!tok_) return "";
  std::vector<int32_t> ids;
  const size_t n = token_ids.size() - (stop_token && !l.include_stop_str_in_output ? 1 : 0);
  for (size_t i = 0; i < n; ++i)
    if (token_ids[i] >= 0 && token_ids[i] < tok_->vocab_size()) ids.push_back(token_ids[i]);
  return tok_->decode(ids, l.skip_special_tokens);
}

ChoiceSummary RequestTracker::summary_of(const Live& l) {
  return {l.request_id, l.choice, int64_t(l.prompt.size()), int64_t(l.tokens.size()), l.times};
}

}  // namespace nanovllm
