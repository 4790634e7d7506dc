// Typed exceptions. Library code throws these (never exit/abort on bad input); the CLI maps a
// UserError to one line on stderr and exit code 2, the server to an OpenAI-style JSON error.
#pragma once
#include <stdexcept>
#include <string>

namespace nanovllm {

// Base of everything we throw: a message that names the file, tensor, parameter or offset.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The caller's input is wrong (bad model directory, bad request, bad flag). Exit code 2.
struct UserError : Error {
  using Error::Error;
};

// A model file or config could not be loaded (missing, truncated, inconsistent).
struct LoadError : UserError {
  using UserError::UserError;
};

// A request (prompt or sampling parameters) is invalid; `param` names the offending field.
struct InvalidRequest : UserError {
  InvalidRequest(std::string param, const std::string& msg) : UserError(msg), param(std::move(param)) {}
  std::string param;
};

// Tokenizer or chat-template failure (malformed tokenizer.json, template syntax error, ...).
struct TokenizerError : UserError {
  using UserError::UserError;
};

// Resource exhaustion we can explain (out of GPU memory at start-up, KV pool too small).
struct ResourceError : Error {
  using Error::Error;
};

}  // namespace nanovllm
