// CORS answers as Starlette's CORSMiddleware gives them in vLLM: nothing without --allowed-origins
// or an Origin header; "*" or the echoed origin; preflights checked for origin, method and headers.
#include <gtest/gtest.h>

#include "nanovllm/server/cors.h"

using namespace nanovllm::server;

namespace {

std::string header(const CorsAnswer& a, const std::string& name) {
  for (auto& [k, v] : a.headers)
    if (k == name) return v;
  return "(absent)";
}

}  // namespace

TEST(Cors, OffWithoutAllowedOriginsOrOrigin) {
  ServerOptions o;
  EXPECT_TRUE(cors(o, "GET", "https://a.example", "", "").headers.empty());
  EXPECT_FALSE(cors(o, "OPTIONS", "https://a.example", "POST", "").preflight);
  o.allowed_origins = {"*"};
  EXPECT_TRUE(cors(o, "GET", "", "", "").headers.empty());
}

TEST(Cors, SimpleRequests) {
  ServerOptions o;
  o.allowed_origins = {"*"};
  EXPECT_EQ(header(cors(o, "GET", "https://a.example", "", ""), "Access-Control-Allow-Origin"), "*");
  o.allowed_origins = {"https://a.example"};
  const CorsAnswer a = cors(o, "POST", "https://a.example", "", "");
  EXPECT_EQ(header(a, "Access-Control-Allow-Origin"), "https://a.example");
  EXPECT_EQ(header(a, "Vary"), "Origin");
  EXPECT_FALSE(a.preflight);
  EXPECT_EQ(header(cors(o, "GET", "https://b.example", "", ""), "Access-Control-Allow-Origin"), "(absent)");
}

TEST(Cors, Preflights) {
  ServerOptions o;
  o.allowed_origins = {"https://a.example"};
  CorsAnswer a = cors(o, "OPTIONS", "https://a.example", "POST", "Authorization, Content-Type");
  EXPECT_TRUE(a.preflight);
  EXPECT_EQ(a.refusal, "");
  EXPECT_EQ(header(a, "Access-Control-Allow-Methods"), "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
  EXPECT_EQ(header(a, "Access-Control-Allow-Headers"), "Authorization, Content-Type");
  EXPECT_EQ(header(a, "Access-Control-Max-Age"), "600");
  EXPECT_EQ(cors(o, "OPTIONS", "https://b.example", "POST", "").refusal, "Disallowed CORS origin");
  o.allowed_methods = {"GET", "POST"};
  o.allowed_headers = {"Authorization"};
  EXPECT_EQ(header(cors(o, "OPTIONS", "https://a.example", "GET", ""), "Access-Control-Allow-Methods"), "GET, POST");
  EXPECT_EQ(cors(o, "OPTIONS", "https://a.example", "PUT", "").refusal, "Disallowed CORS method");
  EXPECT_EQ(cors(o, "OPTIONS", "https://a.example", "POST", "authorization, content-type").refusal, "");
  EXPECT_EQ(cors(o, "OPTIONS", "https://b.example", "PUT", "x-secret").refusal,
            "Disallowed CORS origin, method, headers");
}
