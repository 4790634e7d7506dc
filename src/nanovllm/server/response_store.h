// The bounded in-memory store of /v1/responses (store=true, OpenAI's default): response id ->
// the response object, the conversation that led to it (for previous_response_id) and, while it
// runs, its request channel (for cancel). Memory is bounded by a byte budget
// (--responses-store-bytes): an entry counts the JSON bytes of its response and conversation, and
// the oldest entries are evicted until the store fits; an entry larger than the whole budget is
// not kept. Evicted, deleted and unknown ids all answer vLLM's 404. Thread-safe (one mutex).
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "nanovllm/server/openai_protocol.h"
#include "nanovllm/server/request_channel.h"

namespace nanovllm::server {

class ResponseStore {
 public:
  explicit ResponseStore(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Adds or replaces `id` as the newest entry. `channel`: the running request (empty once ended).
  void put(const std::string& id, ojson response, ojson conversation, std::shared_ptr<RequestChannel> channel = {});
  // Replaces a response that is still stored (a deleted or evicted one stays gone; a cancelled one
  // keeps its status). Returns false when it is gone.
  bool update(const std::string& id, ojson response, ojson conversation);
  std::optional<ojson> get(const std::string& id) const;
  // The conversation to continue: its input and its output as chat messages. 404 when unknown;
  // 400 while it is still running.
  ojson conversation(const std::string& id) const;
  // Marks a running response cancelled and returns it with the channel to abort; 404 when unknown,
  // 400 when it has ended.
  std::pair<ojson, std::shared_ptr<RequestChannel>> cancel(const std::string& id);
  bool erase(const std::string& id);
  int64_t bytes() const;
  size_t size() const;

 private:
  struct Entry {
    std::string id;
    ojson response;
    ojson conversation;
    std::weak_ptr<RequestChannel> channel;
    int64_t bytes = 0;
  };
  using List = std::list<Entry>;
  void evict_locked();
  void erase_locked(List::iterator it);

  const int64_t max_bytes_;
  mutable std::mutex mu_;
  List entries_;  // oldest first
  std::unordered_map<std::string, List::iterator> by_id_;
  int64_t bytes_ = 0;
};

}  // namespace nanovllm::server
