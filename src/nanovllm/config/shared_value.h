// Shared<T>: a value that every copy of its owner shares instead of copying (one allocation for
// the n choices of a request, the engine's sequences, the server's records of it). The value is
// immutable: it is set whole (assignment from a T, from what makes one, or from a braced list of
// its elements) and read through a const T& (conversion, ->, *, and the container calls
// begin/end/size/empty/[]), so sharing it is safe across threads. Copying a SamplingParams copies
// pointers, never its lists. T is a container (it has a value_type).
#pragma once
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <utility>

namespace nanovllm {

template <class T>
class Shared {
 public:
  Shared() = default;
  // Implicit, as the plain T field it replaces: `sp.stop_token_ids = ids;`, `= {1, 2};`.
  template <class U,
            class = std::enable_if_t<!std::is_same_v<std::decay_t<U>, Shared> && std::is_convertible_v<U&&, T>>>
  Shared(U&& v) : p_(std::make_shared<const T>(std::forward<U>(v))) {}  // NOLINT
  Shared(std::initializer_list<typename T::value_type> l) : p_(std::make_shared<const T>(l)) {}

  const T& get() const { return p_ ? *p_ : none(); }
  operator const T&() const { return get(); }  // NOLINT: reads as the T it holds
  const T& operator*() const { return get(); }
  const T* operator->() const { return &get(); }

  auto begin() const { return get().begin(); }
  auto end() const { return get().end(); }
  size_t size() const { return get().size(); }
  bool empty() const { return get().empty(); }
  decltype(auto) operator[](size_t i) const { return get()[i]; }

  // Copies that share one value (for tests and measurements: the n choices hold one list).
  bool shares_with(const Shared& o) const { return p_ == o.p_; }
  const void* identity() const { return p_.get(); }

 private:
  static const T& none() {
    static const T e{};  // immutable: safe to share
    return e;
  }
  std::shared_ptr<const T> p_;
};

}  // namespace nanovllm
