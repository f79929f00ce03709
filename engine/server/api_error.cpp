#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace gb::server {

std::string api_error_json(const ApiError& e) {
  nlohmann::json j = {{"message", e.message}, {"type", e.type}};
  j["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  j["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
  return nlohmann::json{{"error", j}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gb::server
