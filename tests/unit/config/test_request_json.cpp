// parse_request_json into ordered_json (config/request_json.cpp): the client's key order is kept,
// duplicate keys keep their first place and their last value (as nlohmann's own parser does), and
// an object of many keys parses in linear time (nlohmann's ordered_map insert is a linear search).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "nanovllm/config/request_json.h"
#include "nanovllm/utils/error.h"

using nanovllm::InvalidRequest;
using nanovllm::parse_request_json;
using ojson = nlohmann::ordered_json;

namespace {

// Each text parsed both ways gives the same document, keys in the same order.
void expect_same_as_nlohmann(const std::string& text) {
  const ojson mine = parse_request_json<ojson>(text);
  const ojson theirs = ojson::parse(text);
  EXPECT_EQ(mine.dump(), theirs.dump()) << text;
}

}  // namespace

TEST(RequestJson, OrderedParseMatchesNlohmann) {
  expect_same_as_nlohmann(R"({"z": 1, "a": [true, null, 2.5, -3, 18446744073709551615], "m": {"y": "s", "b": {}}})");
  expect_same_as_nlohmann(R"([1, {"b": [], "a": [{"d": 1, "c": 2}]}, "x"])");
  expect_same_as_nlohmann(R"("just a string")");
  // Duplicates: first place, last value; below and past the size where objects get an index.
  expect_same_as_nlohmann(R"({"a": 1, "b": 2, "a": {"x": 3}, "c": 4, "b": 5})");
  std::string many = "{";
  for (int i = 0; i < 40; ++i) many += "\"k" + std::to_string(i % 25) + "\": " + std::to_string(i) + ", ";
  many += "\"end\": [1]}";
  expect_same_as_nlohmann(many);
  EXPECT_EQ(parse_request_json<ojson>(many).size(), 26u);
}

TEST(RequestJson, ErrorsStayInvalidRequests) {
  for (const char* bad : {"{\"a\": }", "{\"a\": 1} x", "[1, 2", "{\"a\": 1e400}", "{1: 2}"})
    EXPECT_THROW(parse_request_json<ojson>(bad), InvalidRequest) << bad;
}

TEST(RequestJson, ManyKeysParseInLinearTime) {
  // 200,000 keys (~3 MB): n^2 / 2 = 2e10 string compares with ordered_map's insert, here a
  // few hundred milliseconds at most even on a loaded machine.
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += (i ? ",\"" : "\"") + std::to_string(i) + "\":1";
  text += "}";
  const auto start = std::chrono::steady_clock::now();
  const ojson j = parse_request_json<ojson>(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(j.size(), 200000u);
  EXPECT_EQ(j.begin().key(), "0");
  EXPECT_EQ((--j.end()).key(), "199999");
  EXPECT_LT(seconds, 5.0) << "200,000 keys took " << seconds << " s";
}
