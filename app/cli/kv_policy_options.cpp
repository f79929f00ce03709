#include "cli/kv_policy_options.h"

#include <CLI/CLI.hpp>

namespace gb::cli {

void add_kv_policy_options(CLI::App& sub, KvPolicyOptions& o) {
  std::string names;
  for (const KvPolicyRow& r : kv_policy_rows()) names += std::string(names.empty() ? "" : " | ") + r.name + ": " + r.summary;
  sub.add_option("--kv-policy", o.policy, "KV eviction policy: " + names)->capture_default_str();
  sub.add_option("--kv-budget", o.budget, "Tokens a sequence's KV cache holds at most under --kv-policy");
  sub.add_option("--kv-sinks", o.sinks, "First tokens never evicted (default: sink 4, others 0)");
  sub.add_option("--kv-recent", o.recent, "Most recent tokens always kept (h2o; default budget / 2)");
  sub.add_option("--kv-window", o.window, "snapkv: the last prompt tokens whose attention ranks the prompt")
      ->capture_default_str();
  sub.add_option("--kv-pool", o.pool, "snapkv: max-pooling width over neighbouring tokens (odd)")->capture_default_str();
}

Result<KvPolicy> finish_kv_policy_options(const KvPolicyOptions& o) {
  auto kind = kv_policy_from_name(o.policy);
  if (!kind) return make_error("--kv-policy: " + kind.error().message);
  KvPolicy p;
  p.kind = *kind;
  p.budget = o.budget;
  p.sinks = o.sinks;
  p.recent = o.recent;
  p.window = o.window;
  p.pool = o.pool;
  if (!p.active() && o.budget > 0) return make_error("--kv-budget needs --kv-policy sink, h2o or snapkv");
  auto resolved = resolve_kv_policy(p);
  if (!resolved) return make_error(resolved.error().message);
  return *resolved;
}

}  // namespace gb::cli
