// ResponseStore (response_store.h): a byte-bounded map of stored responses, oldest evicted first.
#include "nanovllm/server/response_store.h"

#include "nanovllm/server/responses_protocol.h"

namespace nanovllm::server {

namespace {

int64_t entry_bytes(const std::string& id, const ojson& response, const ojson& conversation) {
  return int64_t(id.size() + json_text(response).size() + json_text(conversation).size());
}

}  // namespace

void ResponseStore::erase_locked(List::iterator it) {
  bytes_ -= it->bytes;
  by_id_.erase(it->id);
  entries_.erase(it);
}

void ResponseStore::evict_locked() {
  while (bytes_ > max_bytes_ && !entries_.empty()) erase_locked(entries_.begin());
}

void ResponseStore::put(const std::string& id, ojson response, ojson conversation,
                        std::shared_ptr<RequestChannel> channel) {
  const int64_t n = entry_bytes(id, response, conversation);
  std::lock_guard lk(mu_);
  if (auto it = by_id_.find(id); it != by_id_.end()) erase_locked(it->second);
  entries_.push_back({id, std::move(response), std::move(conversation), channel, n});
  by_id_[id] = std::prev(entries_.end());
  bytes_ += n;
  evict_locked();
}

bool ResponseStore::update(const std::string& id, ojson response, ojson conversation) {
  const int64_t n = entry_bytes(id, response, conversation);
  std::lock_guard lk(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  Entry& e = *it->second;
  if (e.response.value("status", "") == "cancelled") response["status"] = "cancelled";
  bytes_ += n - e.bytes;
  e.bytes = n;
  e.response = std::move(response);
  e.conversation = std::move(conversation);
  e.channel.reset();
  evict_locked();
  return by_id_.count(id) != 0;
}

std::optional<ojson> ResponseStore::get(const std::string& id) const {
  std::lock_guard lk(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second->response;
}

ojson ResponseStore::conversation(const std::string& id) const {
  std::lock_guard lk(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) throw response_not_found(id);
  const Entry& e = *it->second;
  const std::string status = e.response.value("status", "");
  if (status == "in_progress")
    throw ApiError(400, "Response with id '" + id + "' is still in progress; continue it once it has ended.",
                   "previous_response_id");
  ojson messages = e.conversation;
  for (auto& m : output_messages(e.response["output"])) messages.push_back(std::move(m));
  return messages;
}

std::pair<ojson, std::shared_ptr<RequestChannel>> ResponseStore::cancel(const std::string& id) {
  std::lock_guard lk(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) throw response_not_found(id);
  Entry& e = *it->second;
  auto ch = e.channel.lock();
  if (!ch || e.response.value("status", "") != "in_progress")
    throw ApiError(
        400,
        "Cannot cancel response '" + id + "': it has already ended (status " + e.response.value("status", "") + ").",
        "response_id");
  e.response["status"] = "cancelled";
  return {e.response, ch};
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lk(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  erase_locked(it->second);
  return true;
}

int64_t ResponseStore::bytes() const {
  std::lock_guard lk(mu_);
  return bytes_;
}

size_t ResponseStore::size() const {
  std::lock_guard lk(mu_);
  return entries_.size();
}

}  // namespace nanovllm::server
