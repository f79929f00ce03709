#include "cli/workload.h"

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sampling/sampler_settings_json.h"

namespace gb::cli {

namespace {

// Every field is type-checked before it is read: nlohmann's get() and value()
// throw on a type mismatch, and a workload file is outside input.
Status parse_prompt(const nlohmann::json& j, const Tokenizer& tokenizer, const std::string& where,
                    GenerationRequest& r) {
  if (j.contains("prompt_ids")) {
    const std::string bad = where + ": prompt_ids must be an array of token ids (0 to " +
                            std::to_string(tokenizer.vocab_size() - 1) + ")";
    if (!j["prompt_ids"].is_array()) return make_error(bad);
    for (const auto& id : j["prompt_ids"]) {
      if (!id.is_number_integer()) return make_error(bad);
      const int64_t v = id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX ? -1 : id.get<int64_t>();
      if (v < 0 || v >= tokenizer.vocab_size()) return make_error(bad);
      r.prompt_ids.push_back(static_cast<TokenId>(v));
    }
  } else if (j.contains("prompt")) {
    if (!j["prompt"].is_string()) return make_error(where + ": prompt must be a string");
    r.prompt_ids = tokenizer.encode(j["prompt"].get<std::string>(), true);
  } else {
    return make_error(where + ": needs 'prompt' or 'prompt_ids'");
  }
  return Status::success();
}

Status parse_isolation(const nlohmann::json& k, const std::string& where, IsolationKey& out) {
  const std::string bad = where + ": isolation_key must be a string (tenant) or an object of strings "
                                  "(tenant, adapter, template, model)";
  if (k.is_string()) {
    out.tenant = k.get<std::string>();
    return Status::success();
  }
  if (!k.is_object()) return make_error(bad);
  const std::pair<const char*, std::string*> fields[] = {
      {"tenant", &out.tenant}, {"adapter", &out.adapter}, {"template", &out.template_version}, {"model", &out.model}};
  for (const auto& [name, field] : fields) {
    if (!k.contains(name)) continue;
    if (!k[name].is_string()) return make_error(bad);
    *field = k[name].get<std::string>();
  }
  return Status::success();
}

Result<WorkloadItem> parse_item(const nlohmann::json& j, const Tokenizer& tokenizer, const std::string& where) {
  if (!j.is_object()) return make_error(where + ": expected a JSON object");
  static const char* const kKnown[] = {"prompt", "prompt_ids", "max_tokens", "arrival_ms", "priority",
                                       "sampling", "isolation_key", "ignore_eos"};
  for (const auto& item : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || item.key() == k;
    if (!known) return make_error(where + ": unknown field '" + item.key() + "'");
  }
  WorkloadItem item;
  GenerationRequest& r = item.request;
  GB_TRY(parse_prompt(j, tokenizer, where, r));
  nlohmann::json sampling = j.value("sampling", nlohmann::json::object());
  if (!sampling.is_object()) return make_error(where + ": sampling must be an object");
  if (!sampling.contains("temperature")) sampling["temperature"] = 0.0;  // greedy unless asked
  auto settings = sampler_settings_from_json(sampling.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), where);
  if (!settings) return settings.error();
  r.sampling = *settings;
  if (j.contains("max_tokens")) {
    const auto& m = j["max_tokens"];
    int64_t v = 0;
    if (m.is_number_unsigned()) v = m.get<uint64_t>() > INT32_MAX ? -1 : static_cast<int64_t>(m.get<uint64_t>());
    else if (m.is_number_integer()) v = m.get<int64_t>();
    if (v < 1 || v > INT32_MAX)
      return make_error(where + ": max_tokens must be a positive integer (at most " + std::to_string(INT32_MAX) + ")");
    r.sampling.max_tokens = static_cast<int32_t>(v);
  }
  if (j.contains("arrival_ms")) {
    if (!j["arrival_ms"].is_number() || j["arrival_ms"].get<double>() < 0)
      return make_error(where + ": arrival_ms must be a number >= 0");
    item.arrival_ms = j["arrival_ms"].get<double>();
  }
  const nlohmann::json priority = j.value("priority", nlohmann::json("interactive"));
  if (priority == "interactive") r.priority = Priority::Interactive;
  else if (priority == "batch") r.priority = Priority::Batch;
  else return make_error(where + ": priority must be \"interactive\" or \"batch\"");
  if (j.contains("isolation_key")) GB_TRY(parse_isolation(j["isolation_key"], where, r.isolation));
  if (j.contains("ignore_eos") && !j["ignore_eos"].is_boolean()) return make_error(where + ": ignore_eos must be true or false");
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
