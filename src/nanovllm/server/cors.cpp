#include "nanovllm/server/cors.h"

#include <algorithm>
#include <cctype>

namespace nanovllm::server {

namespace {

bool has(const std::vector<std::string>& list, std::string_view v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// "a, B ,c" -> {"a", "b", "c"}
std::vector<std::string> header_names(std::string_view list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= list.size()) {
    size_t j = list.find(',', i);
    if (j == std::string_view::npos) j = list.size();
    std::string_view t = list.substr(i, j - i);
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    if (!t.empty()) out.push_back(lower(t));
    i = j + 1;
  }
  return out;
}

}  // namespace

CorsAnswer cors(const ServerOptions& o, std::string_view method, std::string_view origin,
                std::string_view request_method, std::string_view request_headers) {
  CorsAnswer a;
  if (o.allowed_origins.empty() || origin.empty()) return a;
  const bool any_origin = has(o.allowed_origins, "*");
  const bool origin_ok = any_origin || has(o.allowed_origins, origin);
  a.preflight = method == "OPTIONS" && !request_method.empty();
  if (origin_ok) {
    a.headers.emplace_back("Access-Control-Allow-Origin", any_origin ? "*" : std::string(origin));
    if (!any_origin) a.headers.emplace_back("Vary", "Origin");
  }
  if (!a.preflight) return a;
  const bool any_method = has(o.allowed_methods, "*");
  const bool method_ok = any_method || has(o.allowed_methods, request_method);
  bool headers_ok = true;
  if (!has(o.allowed_headers, "*")) {
    std::vector<std::string> allowed;
    for (auto& h : o.allowed_headers) allowed.push_back(lower(h));
    for (const char* simple : {"accept", "accept-language", "content-language", "content-type"})
      allowed.emplace_back(simple);
    for (auto& h : header_names(request_headers)) headers_ok = headers_ok && has(allowed, h);
  }
  std::string refused;
  if (!origin_ok) refused = "origin";
  if (!method_ok) refused += std::string(refused.empty() ? "" : ", ") + "method";
  if (!headers_ok) refused += std::string(refused.empty() ? "" : ", ") + "headers";
  if (!refused.empty()) {
    a.refusal = "Disallowed CORS " + refused;
    return a;
  }
  a.headers.emplace_back("Access-Control-Allow-Methods",
                         any_method ? "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT" : joined(o.allowed_methods));
  a.headers.emplace_back("Access-Control-Max-Age", "600");
  if (!request_headers.empty()) a.headers.emplace_back("Access-Control-Allow-Headers", std::string(request_headers));
  return a;
}

}  // namespace nanovllm::server
