// `glassbox-cli score`: teacher-forced scoring of a text file -- per token its
// log-probability, rank, entropy and top-10 alternatives, and the perplexity;
// with --base, per-token KL(base || model) and top-1 agreement against a second
// model of the same vocabulary (runtime/text_scorer.h, docs/compare.md); with
// --kv-policy, what a KV eviction policy costs against the full cache
// (runtime/kv_policy_score.h, docs/kv-eviction.md).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/command_registry.h"
#include "cli/kv_policy_options.h"
#include "cli/model_session.h"
#include "cli/remote_compare.h"
#include "runtime/kv_policy_score.h"
#include "runtime/text_score_json.h"
#include "runtime/text_scorer.h"

namespace gb::cli {
namespace {

struct ScoreArgs {
  ModelOptions model;
  std::string text_path;
  std::string base_path;
  std::string base_tokenizer;
  std::string base_kv_type_k = "f32", base_kv_type_v = "f32";
  int32_t top_n = 10;
  int32_t window = 0;  // llama-perplexity's -c: score in windows, second halves only
  int32_t first = 0;   // score only the text's first N tokens (0: all)
  int32_t kv_prompt = 0;  // --kv-policy: tokens given as the prompt (0: 1, snapkv half the text)
  KvPolicyOptions kv_policy;
  bool json = false;
  RemoteTarget remote;  // url set: score on that server (echo + logprobs)
};

void print_json(const TextScore& score, const ScoreArgs& a, const Tokenizer& tok) {
  TextScoreJsonOptions o;
  o.model_path = a.model.model_path;
  o.base_path = a.base_path;
  o.text_file = a.text_path;
  o.window = a.window;
  const std::string line = text_score_to_json(score, tok, o);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

void print_text(const TextScore& score, const Tokenizer& tok) {
  std::string quoted;
  for (const TokenScore& s : score.tokens) {
    // Appended piece by piece: GCC 12 at -O3 takes "'" + std::string for an
    // overlapping copy (-Wrestrict, a false positive).
    quoted.assign(1, '\'');
    quoted += tok.token_bytes(s.id);
    quoted += '\'';
    std::printf("%5d %6d %-16s logprob %8.4f rank %5d entropy %6.3f", s.position, s.id, quoted.c_str(), s.logprob,
                s.rank, s.entropy);
    if (s.kl) std::printf(" kl %8.5f %s", *s.kl, *s.top1_agree ? "agree" : "DIFFER");
    std::printf("\n");
  }
  std::printf("tokens %zu, mean logprob %.5f, perplexity %.4f\n", score.tokens.size(), score.mean_logprob,
              score.perplexity);
  if (score.kl) {
    const KlSummary& k = *score.kl;
    std::printf("KL mean %.6f, p50 %.6f, p90 %.6f, p99 %.6f, max %.6f; top-1 agreement %.2f%%\n", k.mean, k.p50, k.p90,
                k.p99, k.max, 100.0 * k.top1_agreement);
    std::printf("KL min %.6f, p1 %.6f, p5 %.6f, p10 %.6f, p95 %.6f, p99.9 %.6f\n", k.min, k.p01, k.p05, k.p10, k.p95,
                k.p999);
  }
}

// Full-cache perplexity from the base log-probabilities the policy run records.
double full_perplexity(const TextScore& score) {
  double sum = 0.0;
  for (const TokenScore& t : score.tokens) sum += t.base_logprob.value_or(0.0);
  return score.tokens.empty() ? 0.0 : std::exp(-sum / static_cast<double>(score.tokens.size()));
}

void print_kv_policy(const TextScore& score, const KvPolicy& policy, const KvPolicyScoreStats& st, const ScoreArgs& a,
                     const Tokenizer& tok) {
  const double full = full_perplexity(score);
  const double change = full > 0.0 ? 100.0 * (score.perplexity / full - 1.0) : 0.0;
  if (a.json) {
    TextScoreJsonOptions o;
    o.model_path = a.model.model_path;
    o.text_file = a.text_path;
    nlohmann::json j = nlohmann::json::parse(text_score_to_json(score, tok, o));
    j["kv_policy"] = {{"policy", describe_kv_policy(policy)},
                      {"perplexity_full", full},
                      {"perplexity_change_percent", change},
                      {"evicted_tokens", st.num_evicted},
                      {"max_slots", st.max_slots},
                      {"moved_rows", st.num_moved_rows}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  print_text(score, tok);
  std::printf("KV policy %s: perplexity %.4f vs %.4f with the full cache (%+.3f%%); %lld tokens evicted, at most %d "
              "slots held, %lld rows moved\n",
              describe_kv_policy(policy).c_str(), score.perplexity, full, change,
              static_cast<long long>(st.num_evicted), st.max_slots, static_cast<long long>(st.num_moved_rows));
}

int run_score(const ScoreArgs& a) {
  std::ifstream in(a.text_path, std::ios::binary);
  if (!in) return fail("--text: cannot open " + a.text_path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!a.remote.url.empty()) {
    if (!a.model.model_path.empty() || !a.base_path.empty()) return fail("give --model or --remote, not both (no --base with --remote)");
    if (a.window > 0) return fail("--window is not available with --remote");
    return run_remote_score(a.remote, ss.str(), a.text_path, a.top_n, a.json);
  }
  if (a.model.model_path.empty()) return fail("--model is required (or --remote URL)");
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);
  std::optional<ModelSession> base;
  if (!a.base_path.empty()) {
    ModelOptions bo = a.model;
    bo.model_path = a.base_path;
    bo.tokenizer_path = a.base_tokenizer;
    bo.kv_type_k = a.base_kv_type_k;
    bo.kv_type_v = a.base_kv_type_v;
    auto b = open_model_session(bo);
    if (!b) return fail("--base: " + b.error().message);
    if (Status st = check_comparable_vocabularies(*session->tokenizer, a.model.model_path, *b->tokenizer, a.base_path); !st)
      return fail(st.error().message);
    base = std::move(*b);
  }
  std::vector<TokenId> ids = session->tokenizer->encode(ss.str(), true);
  if (a.first > 0 && static_cast<int32_t>(ids.size()) > a.first) ids.resize(static_cast<size_t>(a.first));
  auto policy = finish_kv_policy_options(a.kv_policy);
  if (!policy) return fail(policy.error().message);
  ScoreOptions options;
  options.top_n = a.top_n;
  options.k_type = session->kv_types.k;
  options.v_type = session->kv_types.v;
  if (base) {
    options.base_k_type = base->kv_types.k;
    options.base_v_type = base->kv_types.v;
  }
  if (policy->active()) {
    if (base || a.window > 0) return fail("--kv-policy compares with the full cache itself: no --base or --window");
    KvPolicyScoreStats st;
    const auto n = static_cast<int32_t>(ids.size());
    const int32_t prompt = a.kv_prompt > 0 ? a.kv_prompt : policy->kind == KvPolicyKind::SnapKV ? n / 2 : 1;
    auto score = score_tokens_with_kv_policy(*session->model, *session->backend, ids, *policy, prompt, options, &st);
    if (!score) return fail(score.error().message);
    print_kv_policy(*score, *policy, st, a, *session->tokenizer);
    return 0;
  }
  const Model* base_model = base ? base->model.get() : nullptr;
  Backend* base_backend = base ? base->backend.get() : nullptr;
  auto score = a.window > 0 ? score_tokens_in_windows(*session->model, *session->backend, base_model, base_backend, ids,
                                                      a.window, session->tokenizer->bos_id(), options)
                            : score_tokens(*session->model, *session->backend, base_model, base_backend, ids, options);
  if (!score) return fail(score.error().message);
  if (a.json) print_json(*score, a, *session->tokenizer);
  else print_text(*score, *session->tokenizer);
  return 0;
}

const CommandRegistrar score_command("score", "Score a text by teacher forcing (log-probabilities, perplexity, KL to a base)",
                                 [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<ScoreArgs>();
  add_model_options(sub, a->model, false);
  sub.add_option("--remote", a->remote.url, "Score on an OpenAI-compatible server (http://HOST:PORT[/v1]) via echo + logprobs");
  sub.add_option("--api-key", a->remote.api_key, "Bearer key for --remote");
  sub.add_option("--remote-model", a->remote.model, "Model name on the --remote server (default: its first)");
  sub.add_option("--text", a->text_path, "Text file to score (BOS is added)")->required();
  sub.add_option("--base", a->base_path, "Second model with the same vocabulary: per-token KL(base || model)");
  sub.add_option("--base-tokenizer", a->base_tokenizer, "Tokenizer of the base model (default: embedded or beside it)");
  sub.add_option("--base-kv-type-k", a->base_kv_type_k, "KV cache type of the base's K (default f32: the exact reference)");
  sub.add_option("--base-kv-type-v", a->base_kv_type_v, "KV cache type of the base's V (default f32)");
  sub.add_option("--top", a->top_n, "Alternatives listed per token")->capture_default_str();
  sub.add_option("--window", a->window,
                 "Score like llama-perplexity -c N: windows of N tokens, each starting with BOS, only their second "
                 "halves counted (docs/compare.md)");
  sub.add_option("--first", a->first, "Score only the text's first N tokens");
  add_kv_policy_options(sub, a->kv_policy);
  sub.add_option("--kv-prompt", a->kv_prompt,
                 "With --kv-policy: the text's first N tokens are the prompt, the rest is scored (default 1; snapkv: half)");
  sub.add_flag("--json", a->json, "Print one JSON object (docs/compare.md)");
  return [a] { return run_score(*a); };
});

}  // namespace
}  // namespace gb::cli
