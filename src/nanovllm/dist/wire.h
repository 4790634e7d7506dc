// Little helpers to pack plain values and int32 vectors into a control message and back
// (both ends are the same binary on the same architecture, so host byte order is fine).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "nanovllm/utils/error.h"

namespace nanovllm {

class ByteWriter {
 public:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  template <class T>
  void put_vec(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    buf_.insert(buf_.end(), p, p + v.size() * sizeof(T));
  }
  void put_str(const std::string& s) { put_vec(std::vector<char>(s.begin(), s.end())); }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::vector<uint8_t>& b) : b_(b) {}
  template <class T>
  T get() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> get_vec() {
    const uint64_t n = get<uint64_t>();
    if (n > (b_.size() - pos_) / sizeof(T)) throw Error("tensor parallel: truncated control message");
    std::vector<T> v(static_cast<size_t>(n));
    if (n) std::memcpy(v.data(), b_.data() + pos_, size_t(n) * sizeof(T));
    pos_ += size_t(n) * sizeof(T);
    return v;
  }
  std::string get_str() {
    auto v = get_vec<char>();
    return {v.begin(), v.end()};
  }

 private:
  void need(size_t n) const {
    if (b_.size() - pos_ < n) throw Error("tensor parallel: truncated control message");
  }
  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
};

}  // namespace nanovllm
