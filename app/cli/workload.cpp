#include "cli/workload.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "sampling/sampler_settings_json.h"

namespace gb::cli {

namespace {

Result<WorkloadItem> parse_item(const nlohmann::json& j, const Tokenizer& tokenizer, const std::string& where) {
  if (!j.is_object()) return make_error(where + ": expected a JSON object");
  static const char* const kKnown[] = {"prompt", "prompt_ids", "max_tokens", "arrival_ms", "priority",
                                       "sampling", "isolation_key", "ignore_eos"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) return make_error(where + ": unknown field '" + key + "'");
  }
  WorkloadItem item;
  GenerationRequest& r = item.request;
  if (j.contains("prompt_ids")) {
    if (!j["prompt_ids"].is_array()) return make_error(where + ": prompt_ids must be an array of token ids");
    for (const auto& id : j["prompt_ids"]) {
      if (!id.is_number_integer()) return make_error(where + ": prompt_ids must be an array of token ids");
      r.prompt_ids.push_back(id.get<TokenId>());
    }
  } else if (j.contains("prompt")) {
    if (!j["prompt"].is_string()) return make_error(where + ": prompt must be a string");
    r.prompt_ids = tokenizer.encode(j["prompt"].get<std::string>(), true);
  } else {
    return make_error(where + ": needs 'prompt' or 'prompt_ids'");
  }
  nlohmann::json sampling = j.value("sampling", nlohmann::json::object());
  if (!sampling.is_object()) return make_error(where + ": sampling must be an object");
  if (!sampling.contains("temperature")) sampling["temperature"] = 0.0;  // greedy unless asked
  auto settings = sampler_settings_from_json(sampling.dump(), where);
  if (!settings) return settings.error();
  r.sampling = *settings;
  if (j.contains("max_tokens")) {
    if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1)
      return make_error(where + ": max_tokens must be a positive integer");
    r.sampling.max_tokens = j["max_tokens"].get<int32_t>();
  }
  if (j.contains("arrival_ms")) {
    if (!j["arrival_ms"].is_number() || j["arrival_ms"].get<double>() < 0)
      return make_error(where + ": arrival_ms must be a number >= 0");
    item.arrival_ms = j["arrival_ms"].get<double>();
  }
  const std::string priority = j.value("priority", std::string("interactive"));
  if (priority == "interactive") r.priority = Priority::Interactive;
  else if (priority == "batch") r.priority = Priority::Batch;
  else return make_error(where + ": priority must be \"interactive\" or \"batch\"");
  if (j.contains("isolation_key")) {
    const auto& k = j["isolation_key"];
    if (k.is_string()) {
      r.isolation.tenant = k.get<std::string>();
    } else if (k.is_object()) {
      r.isolation.tenant = k.value("tenant", "");
      r.isolation.adapter = k.value("adapter", "");
      r.isolation.template_version = k.value("template", "");
      r.isolation.model = k.value("model", "");
    } else {
      return make_error(where + ": isolation_key must be a string (tenant) or an object");
    }
  }
  r.ignore_eos = j.value("ignore_eos", false);
  return item;
}

}  // namespace

Result<std::vector<WorkloadItem>> load_workload(const std::string& path, const Tokenizer& tokenizer) {
  std::ifstream in(path);
  if (!in) return make_error(path + ": cannot open the workload file");
  std::vector<WorkloadItem> items;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) return make_error(where + ": not valid JSON");
    auto item = parse_item(j, tokenizer, where);
    if (!item) return item.error();
    items.push_back(std::move(*item));
  }
  if (items.empty()) return make_error(path + ": the workload has no requests");
  return items;
}

}  // namespace gb::cli
