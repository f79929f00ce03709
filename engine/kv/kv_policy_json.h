// The JSON form of a KV eviction policy (kv/kv_policy.h): the server's request
// field `kv_policy` and a Compare lane's `kv_policy` member (docs/server.md,
// docs/compare.md) read the same text:
//   "h2o"                                    a name: the policy's defaults
//   {"policy": "h2o", "budget": 256, "sinks": 4, "recent": 64,
//    "window": 32, "pool": 7}                every member but policy optional
// nlohmann_json stays inside the .cpp.
// Thread: pure functions, any thread.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "kv/kv_policy.h"

namespace gb {

// The resolved policy (resolve_kv_policy), or an error. `field`, when given,
// is set to the member the error is about: "kv_policy" or "kv_policy.budget".
Result<KvPolicy> kv_policy_from_json(std::string_view json_text, std::string* field = nullptr);
// {"policy": "h2o", "budget": 256, "sinks": 0, "recent": 128, "window": 32,
// "pool": 7} (every member, as resolved), or "full"; kv_policy_from_json reads
// it back to the same policy.
std::string kv_policy_to_json(const KvPolicy& policy);

}  // namespace gb
