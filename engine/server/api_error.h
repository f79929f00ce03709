// ApiError: an error as the OpenAI API reports it -- an HTTP status and a JSON
// body {"error": {"message", "type", "param", "code"}}. Every refusal of the
// server (bad parameter, missing key, unknown model, full queue ...) is one of
// these, so clients written against OpenAI read our errors unchanged.
// Threads: plain value type.
#pragma once

#include <string>

namespace gb::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI's error type
  std::string param;                            // the offending parameter ("" -> null)
  std::string code;                             // machine-readable code ("" -> null)
  int retry_after_s = 0;                        // > 0: send a Retry-After header
};

inline ApiError bad_param(std::string param, std::string message) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), "invalid_parameter", 0};
}

// {"error": {...}} as JSON text.
std::string api_error_json(const ApiError& error);

}  // namespace gb::server
