#include "cli/soak.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "kv/scheduler.h"
#include "runtime/engine.h"
#include "sampling/sampler_settings_json.h"

namespace gb::cli {
namespace {

constexpr size_t kMaxFailuresKept = 20;
constexpr size_t kRecentRoots = 32;

// Under AddressSanitizer resident memory measures ASan's quarantine of freed
// blocks and its shadow memory (the ASan CI run saw 73 -> 340 MiB in a 250-request
// soak), not Glassbox: the growth bound is not checked there (LeakSanitizer checks
// leaks in that build). RSS is still measured and printed.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssBoundMeaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kRssBoundMeaningful = false;
#else
constexpr bool kRssBoundMeaningful = true;
#endif
#else
constexpr bool kRssBoundMeaningful = true;
#endif

// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"); 0 if unavailable.
int64_t proc_status_kib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::strtoll(line.c_str() + key.size() + 1, nullptr, 10);
  return 0;
}

std::string describe_tokens(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  std::ostringstream s;
  s << a.size() << " tokens, alone " << b.size() << "; first difference at output token " << i;
  if (i < a.size() && i < b.size()) s << " (" << a[i] << " vs " << b[i] << ")";
  return s.str();
}

// One submitted request as the soak follows it.
struct Tracked {
  RequestId id;
  bool is_fork = false;
  // What to replay: a root's own request, or for a fork its root's request
  // and the fork's arguments.
  GenerationRequest root;
  RequestId root_id;
  int32_t fork_tokens = 0;
  std::optional<TokenId> forced;
  int32_t fork_max_tokens = 0;
  std::optional<SamplerSettings> fork_settings;
  bool fork_retain = true;
  std::vector<TokenId> tokens;  // prompt (a fork: the shared tokens) + emitted
  size_t num_prompt = 0;
  std::string reason;           // finish reason; empty while live
  bool replayed = false;
  // Speculative requests that draw (sampled, or greedy with XTC) equal plain
  // decoding in distribution only, and their drafts depend on what else ran
  // (drafts are cut to the budget or dropped when the pool is short): not
  // compared token by token.
  bool comparable = true;
  // For the failure message: what happened to it in the soak.
  int32_t num_preemptions = 0;
  int32_t num_cached = 0;
  bool cow_branch = false;  // shared a parent's blocks copy-on-write
};

class Soak {
 public:
  Soak(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
       const std::function<std::unique_ptr<Backend>()>& make_backend, const SoakOptions& options);
  SoakSummary run();

 private:
  SamplerSettings random_settings();
  std::vector<TokenId> random_prompt(int32_t max_len);
  bool chance(double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p; }
  int32_t uniform(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }
  float uniformf(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  void submit_some();
  void submit_root(const Tracked* regenerate_from);
  void submit_fork(const Tracked& root);
  const Tracked* pick_recent_root(size_t min_tokens);
  void remember_root(RequestId id);
  void maybe_cancel();
  void on_event(const TraceEvent& e);
  void drain();  // the engine's events since the last drain, through on_event
  void claim_unclaimed(Tracked& t);
  bool step_once();
  void check_invariants();
  void replay_finished();
  Result<std::vector<TokenId>> replay(const Tracked& t);
  std::vector<TokenId> replay_tokens(RequestId id);
  void compare(Tracked& t);
  std::string describe(const Tracked& t) const;
  void finish_checks();
  void fail(const std::string& message);
  int64_t num_live() const;

  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  SoakOptions options_;
  std::mt19937_64 rng_;
  std::unique_ptr<Engine> engine_, replay_engine_;
  std::map<uint64_t, Tracked> tracked_;  // live, and recent roots kept for forks
  std::deque<RequestId> recent_roots_;
  std::map<uint64_t, std::vector<TokenId>> unclaimed_;  // tokens of a fork published before fork() returned
  std::vector<RequestId> done_;
  std::vector<TraceEvent> replay_events_;
  SoakSummary summary_;
  int32_t max_total_ = 0;
  bool injected_ = false;
};

Soak::Soak(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
           const std::function<std::unique_ptr<Backend>()>& make_backend, const SoakOptions& options)
    : model_(std::move(model)), tokenizer_(std::move(tokenizer)), options_(options), rng_(options.seed) {
  const int32_t context = model_->config.context_length;
  EngineConfig config;
  config.block_size = 16;
  config.max_seqs = 8;
  config.max_batch_tokens = 256;
  config.max_prefill_chunk = 64;
  config.max_retained = options.max_retained;
  config.max_finished_records = 256;
  config.kv_types = options.kv_types;
  config.check_invariants = false;  // swept by the soak itself, which reports instead of aborting
  // One and a half full contexts: a few live requests already preempt.
  config.num_blocks = options.num_blocks > 0 ? options.num_blocks : (context * 3 / 2 + 15) / 16;
  engine_ = std::make_unique<Engine>(model_, tokenizer_, make_backend(), config);
  // Alone: the same limits (budget, prefill chunks), a roomy pool, nothing kept.
  EngineConfig alone = config;
  alone.num_blocks = 0;
  alone.record_kv_events = false;
  alone.check_invariants = false;
  replay_engine_ = std::make_unique<Engine>(model_, tokenizer_, make_backend(), alone);
}

void Soak::fail(const std::string& message) {
  ++summary_.num_failures;
  if (summary_.failures.size() < kMaxFailuresKept) summary_.failures.push_back(message);
}

int64_t Soak::num_live() const {
  return std::count_if(tracked_.begin(), tracked_.end(), [](const auto& kv) { return kv.second.reason.empty(); });
}

std::vector<TokenId> Soak::random_prompt(int32_t max_len) {
  const int32_t len = chance(0.2) ? uniform(100, max_len) : uniform(1, std::min(100, max_len));
  std::vector<TokenId> p{tokenizer_->bos_id()};
  while (static_cast<int32_t>(p.size()) < len) p.push_back(uniform(3, model_->config.vocab_size - 1));
  return p;
}

// Settings that touch every stage now and then: greedy or sampled, truncation,
// penalties, DRY, XTC, logit bias (bans too), a shuffled order, stop strings,
// a reasoning budget.
SamplerSettings Soak::random_settings() {
  SamplerSettings s;
  s.seed = rng_();
  s.max_tokens = chance(0.15) ? uniform(100, 300) : uniform(1, 100);
  s.temperature = chance(0.4) ? 0.0f : uniformf(0.2f, 1.5f);
  s.top_k = chance(0.4) ? 0 : uniform(1, 60);
  s.top_p = chance(0.5) ? 1.0f : uniformf(0.5f, 1.0f);
  s.min_p = chance(0.5) ? 0.0f : uniformf(0.0f, 0.2f);
  s.typical_p = chance(0.25) ? uniformf(0.5f, 1.0f) : 1.0f;
  if (chance(0.3)) s.repeat_penalty = uniformf(1.0f, 1.5f);
  if (chance(0.25)) s.presence_penalty = uniformf(0.0f, 0.8f);
  if (chance(0.25)) s.frequency_penalty = uniformf(0.0f, 0.8f);
  const int32_t windows[] = {-1, 0, 16, 64};
  s.penalty_last_n = windows[uniform(0, 3)];
  if (chance(0.2)) s.dry.multiplier = uniformf(0.3f, 1.0f);
  if (chance(0.2)) {
    s.xtc.probability = uniformf(0.1f, 0.6f);
    s.xtc.threshold = uniformf(0.05f, 0.3f);
  }
  // Bans only in the default order: after a truncation the banned token may be
  // the last one left, which fails that request (a user's error, not the engine's).
  const bool shuffled = chance(0.15);
  if (shuffled) std::shuffle(s.order.begin(), s.order.end(), rng_);
  for (int i = chance(0.3) ? uniform(1, 3) : 0; i > 0; --i)
    s.logit_bias.emplace_back(uniform(3, model_->config.vocab_size - 1), !shuffled && chance(0.2)
                                                                             ? -std::numeric_limits<float>::infinity()
                                                                             : uniformf(-5.0f, 5.0f));
  if (chance(0.15)) s.stop_strings = {chance(0.5) ? "." : " the"};
  if (chance(0.05)) {
    s.reasoning.max_tokens = uniform(0, 5);
    s.reasoning.open_marker = " the";
    s.reasoning.close_marker = ".";
  }
  s.top_n_record = uniform(0, 8);
  return s;
}

void Soak::remember_root(RequestId id) {
  recent_roots_.push_back(id);
  if (recent_roots_.size() <= kRecentRoots) return;
  const RequestId old = recent_roots_.front();
  recent_roots_.pop_front();
  if (auto it = tracked_.find(old.value); it != tracked_.end() && it->second.replayed) tracked_.erase(it);
}

const Tracked* Soak::pick_recent_root(size_t min_tokens) {
  std::vector<const Tracked*> candidates;
  for (RequestId id : recent_roots_)
    if (auto it = tracked_.find(id.value); it != tracked_.end() && it->second.comparable &&
                                           !it->second.root.kv_policy.active() &&
                                           it->second.tokens.size() >= min_tokens)
      candidates.push_back(&it->second);
  if (candidates.empty()) return nullptr;
  return candidates[static_cast<size_t>(uniform(0, static_cast<int32_t>(candidates.size()) - 1))];
}

// A new root, or a regeneration of a recent one (the same prompt, or an edited
// one, branching from it with a new seed, as the workbench submits them).
void Soak::submit_root(const Tracked* regenerate_from) {
  GenerationRequest r;
  r.sampling = random_settings();
  if (regenerate_from) {
    r.prompt_ids = regenerate_from->root.prompt_ids;
    if (chance(0.5)) {  // an edit: cut, then new tokens
      r.prompt_ids.resize(static_cast<size_t>(uniform(1, static_cast<int32_t>(r.prompt_ids.size()))));
      for (int i = uniform(0, 20); i > 0; --i) r.prompt_ids.push_back(uniform(3, model_->config.vocab_size - 1));
    }
    r.branch_from = {regenerate_from->id};
  } else {
    r.prompt_ids = random_prompt(std::min(400, max_total_ - 2));
  }
  r.sampling.max_tokens = std::min(r.sampling.max_tokens, max_total_ - 1);
  r.priority = chance(0.3) ? Priority::Batch : Priority::Interactive;
  r.ignore_eos = chance(0.5);
  r.retain_kv = chance(0.6);
  r.use_prefix_cache = chance(0.9);
  if (chance(0.15)) {
    SpeculativeConfig spec;
    spec.k = uniform(1, 6);
    spec.timing_fallback = false;  // timings never change the tokens
    r.speculative = spec;
  }
  if (!regenerate_from && !r.speculative && chance(options_.kv_policy_share)) {
    const KvPolicyKind kinds[] = {KvPolicyKind::Sink, KvPolicyKind::H2O, KvPolicyKind::SnapKV};
    r.kv_policy.kind = kinds[uniform(0, 2)];
    r.kv_policy.budget = uniform(16, 256);
    if (r.kv_policy.kind == KvPolicyKind::SnapKV) r.kv_policy.window = uniform(1, 16);
    ++summary_.evicting;
  }
  auto id = engine_->submit(r);
  if (!id) return fail("submit refused a valid request: " + id.error().message);
  ++summary_.requests;
  summary_.regenerations += regenerate_from != nullptr;
  summary_.speculative += r.speculative.has_value();
  Tracked t;
  t.id = *id;
  t.root_id = *id;
  t.tokens = r.prompt_ids;
  t.num_prompt = r.prompt_ids.size();
  // Greedy with XTC draws too (whether XTC fires), and speculation verifies
  // against XTC's mixture: only the same distribution as plain decoding.
  t.comparable = !(r.speculative && (!r.sampling.is_greedy() || r.sampling.xtc.probability > 0.0f));
  t.root = std::move(r);
  claim_unclaimed(t);
  tracked_.emplace(id->value, std::move(t));
  remember_root(*id);
}

void Soak::submit_fork(const Tracked& root) {
  Tracked t;
  t.is_fork = true;
  t.root = root.root;
  t.root_id = root.id;
  t.fork_tokens = uniform(2, std::min(static_cast<int32_t>(root.tokens.size()), max_total_ - 3));
  if (chance(0.5)) t.forced = uniform(3, model_->config.vocab_size - 1);
  Result<RequestId> id = make_error("unset");
  if (!t.forced && chance(0.3)) {
    t.fork_settings = random_settings();
    t.fork_retain = chance(0.5);
    id = engine_->fork_with_settings(root.id, t.fork_tokens, *t.fork_settings, t.fork_retain);
  } else {
    t.fork_max_tokens = uniform(2, 80);
    id = engine_->fork(root.id, t.fork_tokens, t.forced, t.fork_max_tokens);
  }
  if (!id) return fail("fork of request " + std::to_string(root.id.value) + " at " + std::to_string(t.fork_tokens) +
                       " refused: " + id.error().message);
  ++summary_.requests;
  ++summary_.forks;
  t.id = *id;
  t.tokens.assign(root.tokens.begin(), root.tokens.begin() + t.fork_tokens);
  t.num_prompt = t.tokens.size();
  claim_unclaimed(t);
  tracked_.emplace(id->value, std::move(t));
}

void Soak::claim_unclaimed(Tracked& t) {
  auto it = unclaimed_.find(t.id.value);
  if (it == unclaimed_.end()) return;
  t.tokens.insert(t.tokens.end(), it->second.begin(), it->second.end());
  unclaimed_.erase(it);
}

void Soak::submit_some() {
  const int64_t target = uniform(1, options_.max_live);
  while (summary_.requests < options_.num_requests && num_live() < target) {
    const double kind = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    if (kind < 0.15) {
      if (const Tracked* root = pick_recent_root(3)) {
        submit_fork(*root);
        continue;
      }
    } else if (kind < 0.3) {
      if (const Tracked* root = pick_recent_root(2)) {
        const Tracked copy = *root;  // submit_root may erase it (remember_root)
        submit_root(&copy);
        continue;
      }
    }
    submit_root(nullptr);
  }
}

void Soak::maybe_cancel() {
  if (!chance(0.03)) return;
  std::vector<RequestId> live;
  for (const auto& [v, t] : tracked_)
    if (t.reason.empty()) live.push_back(t.id);
  if (live.empty()) return;
  const RequestId victim = live[static_cast<size_t>(uniform(0, static_cast<int32_t>(live.size()) - 1))];
  if (engine_->cancel(victim)) ++summary_.cancels;
  else fail("cancel of live request " + std::to_string(victim.value) + " found nothing to cancel");
}

void Soak::drain() {
  for (const TraceEvent& e : engine_->drain_events()) on_event(e);
}

void Soak::on_event(const TraceEvent& e) {
  const auto find = [&](RequestId id) -> Tracked* {
    auto it = tracked_.find(id.value);
    return it == tracked_.end() ? nullptr : &it->second;
  };
  if (const auto* tok = std::get_if<TokenSampledEvent>(&e.body)) {
    ++summary_.tokens;
    if (Tracked* t = find(tok->request)) t->tokens.push_back(tok->token);
    else unclaimed_[tok->request.value].push_back(tok->token);
  } else if (const auto* fin = std::get_if<RequestFinishedEvent>(&e.body)) {
    Tracked* t = find(fin->request);
    if (!t) return fail("finished event for unknown request " + std::to_string(fin->request.value));
    if (!t->reason.empty()) return fail("request " + std::to_string(fin->request.value) + " finished twice");
    t->reason = fin->reason;
    t->num_cached = fin->num_cached_tokens;
    done_.push_back(fin->request);
  } else if (const auto* pre = std::get_if<RequestPreemptedEvent>(&e.body)) {
    ++summary_.preemptions;
    if (Tracked* t = find(pre->request)) ++t->num_preemptions;
  } else if (const auto* err = std::get_if<ErrorEvent>(&e.body)) {
    fail("engine error: " + err->message);
  }
}

// The pool's and scheduler's invariants, and the soak's own: the owned blocks
// are exactly the ones live and retained requests hold.
void Soak::check_invariants() {
  ++summary_.invariant_checks;
  std::vector<RequestId> live;
  for (const auto& [v, t] : tracked_)
    if (t.reason.empty()) live.push_back(t.id);
  if (Status st = engine_->check_kv_ownership(live); !st)
    fail("after step " + std::to_string(summary_.steps) + ": " + st.error().message);
  const size_t kept = engine_->retained_requests().size();
  if (options_.max_retained > 0 && static_cast<int32_t>(kept) > options_.max_retained)
    fail(std::to_string(kept) + " requests keep blocks, more than max_retained");
  if (!unclaimed_.empty()) fail("tokens for a request nobody submitted");
}

// One step and its checks; false when the engine stalled (work left, nothing runs).
bool Soak::step_once() {
  auto stepped = engine_->step();
  ++summary_.steps;
  drain();
  if (!stepped) {
    fail("step failed: " + stepped.error().message);
    return false;
  }
  check_invariants();
  return *stepped || !engine_->has_work();
}

std::vector<TokenId> Soak::replay_tokens(RequestId id) {
  std::vector<TokenId> out;
  for (const TraceEvent& e : replay_events_)
    if (const auto* tok = std::get_if<TokenSampledEvent>(&e.body); tok && tok->request == id) out.push_back(tok->token);
  return out;
}

// The request alone on the second engine: a root as submitted (without its
// branch parent, which only saves work), a fork as its root then the same fork.
Result<std::vector<TokenId>> Soak::replay(const Tracked& t) {
  ++summary_.replays;
  replay_events_.clear();
  GenerationRequest r = t.root;
  r.branch_from.clear();
  r.use_prefix_cache = false;
  r.retain_kv = t.is_fork;
  auto root = replay_engine_->submit(r);
  if (!root) return root.error();
  GB_TRY(replay_engine_->run_until_idle());
  if (!t.is_fork) {
    replay_events_ = replay_engine_->drain_events();
    return replay_tokens(*root);
  }
  auto child = t.fork_settings
                   ? replay_engine_->fork_with_settings(*root, t.fork_tokens, *t.fork_settings, t.fork_retain)
                   : replay_engine_->fork(*root, t.fork_tokens, t.forced, t.fork_max_tokens);
  if (!child) return child.error();
  GB_TRY(replay_engine_->run_until_idle());
  replay_events_ = replay_engine_->drain_events();
  replay_engine_->release(*root);
  replay_engine_->release(*child);
  return replay_tokens(*child);
}

std::string Soak::describe(const Tracked& t) const {
  std::ostringstream s;
  s << "request " << t.id.value;
  if (t.is_fork) s << " (fork of " << t.root_id.value << " at " << t.fork_tokens << (t.forced ? ", forced token" : "") << ")";
  else if (!t.root.branch_from.empty()) s << " (regeneration of " << t.root.branch_from.front().value << ")";
  const SamplerSettings& settings = t.fork_settings ? *t.fork_settings : t.root.sampling;
  s << (settings.is_greedy() ? " greedy" : " sampled") << (!t.is_fork && t.root.speculative ? " speculative" : "")
    << ", " << t.num_prompt << " prompt tokens (" << t.num_cached << " cached)"
    << (t.cow_branch ? ", copy-on-write" : "") << ", preempted " << t.num_preemptions << " times, " << t.reason;
  return s.str();
}

void Soak::compare(Tracked& t) {
  t.replayed = true;
  if (!t.comparable) return;
  std::vector<TokenId> got(t.tokens.begin() + static_cast<std::ptrdiff_t>(t.num_prompt), t.tokens.end());
  if (options_.inject_mismatch && !injected_) {
    injected_ = true;
    if (got.empty()) got.push_back(0);
    else got[0] = (got[0] + 1) % model_->config.vocab_size;
  }
  auto alone = replay(t);
  const std::string what = describe(t);
  if (!alone) {
    ++summary_.replay_mismatches;
    return fail(what + ": replay failed: " + alone.error().message);
  }
  const bool cancelled = t.reason == "cancelled";
  const bool same = cancelled ? got.size() <= alone->size() && std::equal(got.begin(), got.end(), alone->begin())
                              : got == *alone;
  if (!same) {
    ++summary_.replay_mismatches;
    std::string detail = what + ": tokens differ from its replay alone: " + describe_tokens(got, *alone);
    if (!t.is_fork && t.root.speculative) {
      // Which run strayed: a greedy speculative request must equal plain decoding.
      Tracked plain = t;
      plain.root.speculative.reset();
      if (auto p = replay(plain)) detail += "; plain decoding alone: " + describe_tokens(got, *p);
    }
    fail(detail + "; settings " + sampler_settings_to_json(t.fork_settings ? *t.fork_settings : t.root.sampling));
  }
}

void Soak::replay_finished() {
  for (RequestId id : done_) {
    auto it = tracked_.find(id.value);
    if (it == tracked_.end()) continue;
    compare(it->second);
    const bool recent = std::find(recent_roots_.begin(), recent_roots_.end(), id) != recent_roots_.end();
    if (!recent) tracked_.erase(it);
  }
  done_.clear();
}

void Soak::finish_checks() {
  if (engine_->has_work()) fail("work left at the end");
  if (num_live() != 0) fail(std::to_string(num_live()) + " requests never finished");
  for (RequestId id : engine_->retained_requests()) engine_->release(id);
  drain();
  check_invariants();
  const Engine::KvUsage usage = engine_->kv_usage();
  summary_.blocks_owned_at_end = usage.num_owned + usage.num_window_owned;
  if (summary_.blocks_owned_at_end != 0)
    fail(std::to_string(summary_.blocks_owned_at_end) +
         " blocks still owned at the end (every block must be free or cached)");
  summary_.rss_end_kib = proc_status_kib("VmRSS");
  summary_.peak_rss_kib = proc_status_kib("VmHWM");
  if (kRssBoundMeaningful && summary_.rss_end_kib - summary_.rss_warm_kib > options_.rss_growth_mib * 1024)
    fail("resident memory grew from " + std::to_string(summary_.rss_warm_kib / 1024) + " MiB after the warm-up to " +
         std::to_string(summary_.rss_end_kib / 1024) + " MiB (bound: " + std::to_string(options_.rss_growth_mib) + ")");
}

SoakSummary Soak::run() {
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = engine_->start(); !st) {
    fail(st.error().message);
    return summary_;
  }
  if (Status st = replay_engine_->start(); !st) {
    fail(st.error().message);
    return summary_;
  }
  max_total_ = engine_->max_tokens_per_request();
  const int64_t warm_at = std::max<int64_t>(1, std::min<int64_t>(50, options_.num_requests / 10));
  int stalls = 0;
  while ((summary_.requests < options_.num_requests || engine_->has_work()) && stalls <= 2) {
    submit_some();
    maybe_cancel();
    drain();
    if (engine_->has_work()) stalls = step_once() ? 0 : stalls + 1;
    replay_finished();
    if (summary_.rss_warm_kib == 0 && summary_.requests >= warm_at) summary_.rss_warm_kib = proc_status_kib("VmRSS");
  }
  if (stalls > 2) fail("the engine stalled: work left but no step runs anything");
  replay_finished();
  finish_checks();
  summary_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary_;
}

}  // namespace

std::string SoakSummary::line() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "soak: %s; requests %lld (forks %lld, regenerations %lld, speculative %lld, evicting %lld), cancels %lld, "
                "preemptions %lld, steps %lld, tokens %lld, invariant checks %lld, replays %lld, "
                "replay mismatches %lld, blocks owned at end %d, peak RSS %.1f MiB (after warm-up %.1f, end %.1f), "
                "%.1f s, %.1f requests/s",
                ok() ? "ok" : "FAILED", static_cast<long long>(requests), static_cast<long long>(forks),
                static_cast<long long>(regenerations), static_cast<long long>(speculative),
                static_cast<long long>(evicting), static_cast<long long>(cancels), static_cast<long long>(preemptions), static_cast<long long>(steps),
                static_cast<long long>(tokens), static_cast<long long>(invariant_checks),
                static_cast<long long>(replays), static_cast<long long>(replay_mismatches), blocks_owned_at_end,
                static_cast<double>(peak_rss_kib) / 1024.0, static_cast<double>(rss_warm_kib) / 1024.0,
                static_cast<double>(rss_end_kib) / 1024.0, seconds,
                seconds > 0 ? static_cast<double>(requests) / seconds : 0.0);
  return buf;
}

SoakSummary run_soak(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
                     const std::function<std::unique_ptr<Backend>()>& make_backend, const SoakOptions& options) {
  Soak soak(std::move(model), std::move(tokenizer), make_backend, options);
  return soak.run();
}

}  // namespace gb::cli
