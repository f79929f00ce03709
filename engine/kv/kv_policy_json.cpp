// The JSON form of a KV eviction policy (see kv_policy_json.h).
#include "kv/kv_policy_json.h"

#include <nlohmann/json.hpp>
#include <utility>

namespace gb {
namespace {

using ojson = nlohmann::ordered_json;

Error bad(std::string* field, std::string which, const std::string& message) {
  if (field) *field = std::move(which);
  return Error{message};
}

}  // namespace

Result<KvPolicy> kv_policy_from_json(std::string_view json_text, std::string* field) {
  const ojson value = ojson::parse(json_text, nullptr, false);
  if (value.is_discarded()) return bad(field, "kv_policy", "kv_policy is not valid JSON");
  const ojson* name = &value;
  KvPolicy p;
  if (value.is_object()) {
    auto n = value.find("policy");
    if (n == value.end()) return bad(field, "kv_policy", "kv_policy needs a \"policy\" name");
    name = &*n;
    constexpr int32_t kMax = 1 << 24;
    const std::pair<const char*, int32_t*> ints[] = {
        {"budget", &p.budget}, {"sinks", &p.sinks}, {"recent", &p.recent}, {"window", &p.window}, {"pool", &p.pool}};
    for (const auto& [key, member] : ints) {
      auto it = value.find(key);
      if (it == value.end() || it->is_null()) continue;
      const std::string which = std::string("kv_policy.") + key;
      if (!it->is_number_integer()) return bad(field, which, which + " must be an integer");
      const bool too_big = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(kMax);
      const long long v = too_big ? kMax + 1LL : it->get<long long>();
      if (v < -1 || v > kMax)
        return bad(field, which, which + " = " + it->dump() + " is outside [-1, " + std::to_string(kMax) + "]");
      *member = static_cast<int32_t>(v);
    }
    for (auto it = value.begin(); it != value.end(); ++it) {
      const std::string& key = it.key();
      if (key == "policy") continue;
      bool known = false;
      for (const auto& entry : ints) known = known || key == entry.first;
      if (!known)
        return bad(field, "kv_policy." + key,
                   "kv_policy has no member \"" + key + "\" (policy, budget, sinks, recent, window, pool)");
    }
  } else if (!value.is_string()) {
    return bad(field, "kv_policy", "kv_policy must be a policy name or an object");
  }
  if (!name->is_string()) return bad(field, "kv_policy", "kv_policy's policy must be a string");
  auto kind = kv_policy_from_name(name->get<std::string>());
  if (!kind) return bad(field, "kv_policy", kind.error().message);
  p.kind = *kind;
  if (p.active() && p.budget < 1)
    return bad(field, "kv_policy.budget",
               "kv_policy " + name->get<std::string>() + " needs \"budget\": a token budget of at least 1");
  auto resolved = resolve_kv_policy(p);
  if (!resolved) return bad(field, "kv_policy", resolved.error().message);
  return *resolved;
}

std::string kv_policy_to_json(const KvPolicy& policy) {
  if (!policy.active()) return "\"full\"";
  const ojson j = {{"policy", kv_policy_name(policy.kind)}, {"budget", policy.budget}, {"sinks", policy.sinks},
                   {"recent", policy.recent},                {"window", policy.window}, {"pool", policy.pool}};
  return j.dump();
}

}  // namespace gb
