// Speculative decoding through the Engine on stories260K (greedy):
//   - every drafter (n-gram, draft F16 = near perfect, draft L4 = wrong half the
//     time, the target itself = perfect, self-draft by layer skipping, an
//     always-wrong and a random drafter) gives exactly the tokens of the golden
//     files (run.c, independent) and of plain Engine runs;
//   - a batch mixing speculative and plain requests gives each request the
//     tokens it gets alone, also in a pool small enough to preempt;
//   - seeded sampled runs repeat exactly, also when batched with others;
//   - a draft model with another vocabulary is refused with a clear error;
//   - the trace shows origins and SpeculativeEvents, statistics add up.
// Every engine sweeps the scheduler and block pool invariants after each step,
// so every rollback (KvCacheManager::truncate) is checked.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kv/scheduler.h"
#include "spec_engine_support.h"

namespace {

using namespace spectest;
using nlohmann::json;

struct Golden {
  std::vector<gb::TokenId> prompt;
  std::vector<gb::TokenId> generated;
  int max_tokens = 0;
};

Golden read_golden(const std::string& path) {
  std::ifstream in(path);
  const json g = json::parse(in);
  Golden out;
  out.prompt = g["prompt_tokens"].get<std::vector<gb::TokenId>>();
  out.generated = g["generated_tokens"].get<std::vector<gb::TokenId>>();
  out.max_tokens = g["steps"].get<int>() - static_cast<int>(out.prompt.size()) + 1;  // run.c counts positions
  return out;
}

gb::GenerationRequest greedy(std::vector<gb::TokenId> prompt, int max_tokens) {
  gb::GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.top_n_record = 0;
  return r;
}

Output run_alone(const Fixture& f, const gb::GenerationRequest& r, std::optional<gb::SpeculativeStats>* stats = nullptr) {
  auto engine = make_engine(f);
  auto id = engine->submit(r);
  GB_CHECK_MSG(id.ok(), id.ok() ? nullptr : id.error().message.c_str());
  const gb::Status st = engine->run_until_idle();
  GB_CHECK_MSG(st.ok(), st.ok() ? nullptr : st.error().message.c_str());
  if (stats) *stats = engine->speculative_stats(*id);
  return collect(engine->drain_events())[id->value];
}

const char* kGoldens[] = {"testdata/golden/once_upon_a_time_n64.json", "testdata/golden/once_upon_a_time_n256.json",
                          "testdata/golden/lily_cake_n256.json"};

}  // namespace

GB_TEST(greedy_every_drafter_matches_golden_and_plain) {
  REQUIRE_FIXTURE(f);
  const auto drafters = all_drafters(f);
  for (const char* rel : kGoldens) {
    GB_REQUIRE_SHARED(path, rel);
    const Golden g = read_golden(path);
    const Output plain = run_alone(f, greedy(g.prompt, g.max_tokens));
    QVERIFY2(plain.tokens == g.generated, (std::string(rel) + ": plain engine differs from the golden file").c_str());
    for (const auto& [name, config] : drafters) {
      gb::GenerationRequest r = greedy(g.prompt, g.max_tokens);
      r.speculative = config;
      std::optional<gb::SpeculativeStats> stats;
      const Output out = run_alone(f, r, &stats);
      const std::string what = name + " on " + rel;
      QVERIFY2(out.tokens == g.generated, (what + ": tokens differ from the golden file").c_str());
      QCOMPARE(out.finish_reason, plain.finish_reason);
      QCOMPARE(out.text, plain.text);
      QVERIFY2(stats.has_value(), what.c_str());
      QVERIFY2(stats->drafted >= stats->accepted, what.c_str());
      QCOMPARE(static_cast<int64_t>(out.num_spec_events), stats->num_verifications);
      // Every generated token came from one target forward pass or a verification.
      QVERIFY2(stats->target_forwards <= static_cast<int64_t>(out.tokens.size()) + 1, what.c_str());
      if (name == "always wrong") QCOMPARE(stats->accepted, int64_t{0});
      if (name == "always wrong") QVERIFY2(stats->drafted > 0, "the always-wrong drafter must have drafted");
      if (name.rfind("perfect", 0) == 0) {
        QVERIFY2(stats->accepted == stats->drafted, (what + ": the target drafting for itself must always be accepted").c_str());
        QVERIFY2(stats->target_forwards * 3 < static_cast<int64_t>(out.tokens.size()),
                 (what + ": a perfect drafter with k=6 must save most target forwards").c_str());
      }
    }
  }
}

GB_TEST(origins_and_events_describe_each_verification) {
  REQUIRE_FIXTURE(f);
  GB_REQUIRE_SHARED(path, "testdata/golden/once_upon_a_time_n64.json");
  const Golden g = read_golden(path);
  gb::GenerationRequest r = greedy(g.prompt, g.max_tokens);
  r.speculative = spec_of("draft:" + shared("models/stories260K/stories260K_L4_draft.bin") + ":k=3");
  r.speculative->adaptive = false;
  auto engine = make_engine(f);
  auto id = engine->submit(r);
  QVERIFY(id.ok());
  QVERIFY(engine->run_until_idle().ok());
  const auto events = engine->drain_events();
  int64_t accepted = 0, drafted = 0;
  size_t token_index = 0;
  std::vector<gb::TokenOrigin> origins;
  for (const gb::TraceEvent& e : events)
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) origins.push_back(t->origin);
  QCOMPARE(origins.front(), gb::TokenOrigin::Plain);  // the prefill step's token
  for (const gb::TraceEvent& e : events) {
    const auto* s = std::get_if<gb::SpeculativeEvent>(&e.body);
    if (!s) continue;
    QCOMPARE(s->drafter, std::string("draft"));
    QVERIFY(s->num_accepted <= static_cast<int32_t>(s->drafted.size()));
    QVERIFY(s->bonus == !s->rejected.has_value());
    if (s->rejected) QCOMPARE(*s->rejected, s->drafted[static_cast<size_t>(s->num_accepted)]);
    QVERIFY(s->p.size() == s->q.size() && !s->p.empty());
    for (int32_t i = 0; i < s->num_accepted; ++i) QCOMPARE(s->p[static_cast<size_t>(i)], 1.0f);  // greedy: p one-hot
    if (s->rejected) QCOMPARE(s->p.back(), 0.0f);
    QVERIFY(s->draft_ms >= 0.0 && s->verify_ms > 0.0);
    accepted += s->num_accepted;
    drafted += static_cast<int64_t>(s->drafted.size());
    ++token_index;
  }
  QVERIFY(token_index > 3);
  int64_t n_acc = 0, n_resampled_or_bonus = 0;
  for (gb::TokenOrigin o : origins) {
    n_acc += o == gb::TokenOrigin::Accepted;
    n_resampled_or_bonus += o == gb::TokenOrigin::Resampled || o == gb::TokenOrigin::Bonus;
  }
  // The run ends at max_tokens, possibly inside a verification, so the
  // emitted accepted tokens are at most the accepted drafts.
  QVERIFY(n_acc <= accepted && n_acc + 3 >= accepted);
  QVERIFY(n_resampled_or_bonus + 1 >= static_cast<int64_t>(token_index));
  auto stats = engine->speculative_stats(*id);
  QVERIFY(stats.has_value());
  QCOMPARE(stats->accepted, accepted);
  QCOMPARE(stats->drafted, drafted);
  QVERIFY(stats->acceptance_rate() > 0.2 && stats->acceptance_rate() < 0.95);  // the L4 draft is right about half the time
  QVERIFY(stats->mean_accepted_length() > 1.0);
  int64_t by_pos = 0;
  for (int64_t a : stats->accepted_by_position) by_pos += a;
  QCOMPARE(by_pos, accepted);
  const json j = json::parse(gb::speculative_stats_json(*stats));
  QCOMPARE(j["accepted"].get<int64_t>(), accepted);
  QVERIFY(j.contains("mean_accepted_length") && j.contains("target_forwards") && j.contains("acceptance_rate"));
}

GB_TEST(batch_mixing_speculative_and_plain_equals_alone) {
  REQUIRE_FIXTURE(f);
  const auto drafters = all_drafters(f);
  GB_REQUIRE_SHARED(p1, "testdata/golden/once_upon_a_time_n64.json");
  GB_REQUIRE_SHARED(p2, "testdata/golden/lily_cake_n256.json");
  const Golden g1 = read_golden(p1), g2 = read_golden(p2);
  // Requests: each drafter and a plain one, on alternating prompts and lengths.
  std::vector<gb::GenerationRequest> reqs;
  for (size_t i = 0; i <= drafters.size(); ++i) {
    const Golden& g = i % 2 ? g2 : g1;
    gb::GenerationRequest r = greedy(g.prompt, 40 + static_cast<int>(i) * 7);
    if (i < drafters.size()) r.speculative = drafters[i].second;
    reqs.push_back(r);
    reqs.push_back(greedy(g.prompt, 30 + static_cast<int>(i) * 5));  // plain neighbour
  }
  std::vector<Output> alone;
  for (const auto& r : reqs) {
    gb::GenerationRequest plain = r;
    plain.speculative.reset();  // greedy: speculation must not change tokens, so alone = plain alone
    alone.push_back(run_alone(f, plain));
  }
  for (int32_t num_blocks : {0, 40}) {  // default pool, then one small enough to preempt
    gb::EngineConfig config;
    config.num_blocks = num_blocks;
    config.max_batch_tokens = 64;
    auto engine = make_engine(f, config);
    std::vector<gb::RequestId> ids;
    for (const auto& r : reqs) {
      auto id = engine->submit(r);
      QVERIFY2(id.ok(), id.ok() ? "" : id.error().message.c_str());
      ids.push_back(*id);
    }
    QVERIFY(engine->run_until_idle().ok());
    const auto out = collect(engine->drain_events());
    int32_t verifications = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const std::string what = "request " + std::to_string(i) + (reqs[i].speculative ? " (speculative)" : " (plain)") +
                               " with " + std::to_string(num_blocks) + " blocks";
      QVERIFY2(out.at(ids[i].value).tokens == alone[i].tokens, what.c_str());
      verifications += out.at(ids[i].value).num_spec_events;
    }
    QVERIFY(verifications > 20);
  }
}

GB_TEST(seeded_sampled_runs_repeat_exactly) {
  REQUIRE_FIXTURE(f);
  GB_REQUIRE_SHARED(path, "testdata/golden/once_upon_a_time_n64.json");
  const Golden g = read_golden(path);
  for (const auto& [name, config] : all_drafters(f)) {
    gb::GenerationRequest r = greedy(g.prompt, 48);
    r.sampling.temperature = 0.9f;
    r.sampling.seed = 1234;
    r.speculative = config;
    const Output a = run_alone(f, r);
    const Output b = run_alone(f, r);
    QVERIFY2(a.tokens == b.tokens, (name + ": two seeded runs differ").c_str());
    // Batched with others (and a plain twin of itself): the same tokens again.
    auto engine = make_engine(f);
    QVERIFY(engine->submit(greedy(g.prompt, 20)).ok());
    auto id = engine->submit(r);
    gb::GenerationRequest other = r;
    other.sampling.seed = 99;
    QVERIFY(engine->submit(other).ok());
    QVERIFY(id.ok());
    QVERIFY(engine->run_until_idle().ok());
    QVERIFY2(collect(engine->drain_events())[id->value].tokens == a.tokens, (name + ": batched run differs").c_str());
  }
}

GB_TEST(stop_strings_and_max_tokens_cut_inside_a_verification) {
  REQUIRE_FIXTURE(f);
  GB_REQUIRE_SHARED(path, "testdata/golden/once_upon_a_time_n64.json");
  const Golden g = read_golden(path);
  // The perfect drafter accepts k = 6 at a time, so stops land inside verifications.
  const auto perfect = spec_of("draft:" + f.model_path + ":k=6");
  for (int max_tokens : {1, 2, 5, 9, 13}) {
    gb::GenerationRequest r = greedy(g.prompt, max_tokens);
    const Output plain = run_alone(f, r);
    r.speculative = perfect;
    const Output spec = run_alone(f, r);
    QVERIFY2(spec.tokens == plain.tokens, ("max_tokens " + std::to_string(max_tokens)).c_str());
    QCOMPARE(spec.tokens.size(), static_cast<size_t>(max_tokens));
  }
  for (const char* stop : {"Lily", "park.", "saw a"}) {
    gb::GenerationRequest r = greedy(g.prompt, 64);
    r.sampling.stop_strings = {stop};
    const Output plain = run_alone(f, r);
    r.speculative = perfect;
    const Output spec = run_alone(f, r);
    QCOMPARE(spec.text, plain.text);
    QCOMPARE(spec.finish_reason, std::string("stop"));
    QVERIFY2(spec.tokens == plain.tokens, stop);
  }
}

GB_TEST(draft_model_with_another_vocabulary_is_refused) {
  REQUIRE_FIXTURE(f);
  GB_REQUIRE_SHARED(other, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  auto engine = make_engine(f);
  gb::GenerationRequest r = greedy({1, 400, 300}, 8);
  r.speculative = spec_of("draft:" + other);
  auto id = engine->submit(r);
  QVERIFY(!id.ok());
  const std::string& m = id.error().message;
  QVERIFY2(m.find("llama-2-tiny-random.gguf") != std::string::npos, m.c_str());
  QVERIFY2(m.find("vocabulary") != std::string::npos, m.c_str());
  QVERIFY2(m.find("32000") != std::string::npos && m.find("512") != std::string::npos, m.c_str());
  // Other errors: a missing file, a self-draft as deep as the model.
  r.speculative = spec_of("draft:/nonexistent/draft.bin");
  QVERIFY(!engine->submit(r).ok());
  r.speculative = spec_of("self:5");
  auto deep = engine->submit(r);
  QVERIFY(!deep.ok());
  QVERIFY2(deep.error().message.find("1..4") != std::string::npos, deep.error().message.c_str());
  QVERIFY(!engine->has_work());
}

namespace {

// Wraps the target's backend and checks every block a forward pass or a block
// copy writes: it must be a block of the engine's KV pool that someone holds
// (ref_count > 0). A drafted position written anywhere else -- past the pool,
// or into a block the pool thinks free -- is a block the invariant sweeps and
// the KV map cannot see.
class PoolWatchingBackend final : public gb::Backend {
 public:
  explicit PoolWatchingBackend(std::unique_ptr<gb::Backend> inner) : inner_(std::move(inner)) {}
  const gb::KvCacheManager* kv = nullptr;  // set once the engine has started
  std::vector<std::string> problems;
  int num_checked = 0;
  int num_layer_skipping_forwards = 0;  // self-draft forwards

  gb::Status init_kv_pool(const gb::KvPoolSpec& spec) override { return inner_->init_kv_pool(spec); }
  size_t kv_pool_bytes() const override { return inner_->kv_pool_bytes(); }
  gb::Status forward(const gb::BatchLayout& b, std::span<float> logits) override {
    if (b.num_layers >= 0) ++num_layer_skipping_forwards;
    for (int32_t s = 0; s < b.num_seqs(); ++s)
      for (int32_t t = b.seq_token_indptr[static_cast<size_t>(s)]; t < b.seq_token_indptr[static_cast<size_t>(s) + 1]; ++t) {
        const int32_t slot = b.block_indptr[static_cast<size_t>(s)] + b.positions[static_cast<size_t>(t)] / b.block_size;
        check(b.block_ids[static_cast<size_t>(slot)], b.num_layers >= 0 ? "a self-draft forward" : "a forward");
      }
    return inner_->forward(b, logits);
  }
  gb::Status copy_blocks(std::span<const std::pair<int32_t, int32_t>> src_dst, gb::KvGroup group) override {
    for (const auto& [src, dst] : src_dst) check(dst, "a block copy");
    return inner_->copy_blocks(src_dst, group);
  }
  gb::Status read_kv_slot(int32_t layer, int32_t block, int32_t slot, std::span<float> k,
                          std::span<float> v) const override {
    return inner_->read_kv_slot(layer, block, slot, k, v);
  }
  gb::DeviceInfo device_info() const override { return inner_->device_info(); }

 private:
  void check(int32_t block, const char* what) {
    if (kv == nullptr) return;
    ++num_checked;
    if (block < 0 || block >= kv->num_blocks())
      problems.push_back(std::string(what) + " wrote block " + std::to_string(block) + ", outside the pool of " +
                         std::to_string(kv->num_blocks()));
    else if (kv->pool().block(gb::BlockId{block}).ref_count == 0)
      problems.push_back(std::string(what) + " wrote block " + std::to_string(block) + ", which the pool calls unheld");
  }
  std::unique_ptr<gb::Backend> inner_;
};

}  // namespace

// Self-draft writes its drafted positions into scratch blocks. They must come
// from the engine's one block pool (lookahead blocks), so every block any
// speculative step writes is held in the pool, shows in the KV snapshot with
// its owner, and is swept by the invariants after every step; all of them come
// back when the requests finish.
GB_TEST(every_block_a_speculative_step_writes_is_held_in_the_pool) {
  REQUIRE_FIXTURE(f);
  gb::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  auto watched = std::make_unique<PoolWatchingBackend>(gb::make_cpu_backend(f.model, cpu));
  PoolWatchingBackend* watch = watched.get();
  gb::EngineConfig config;
  config.check_invariants = true;
  config.num_scratch_blocks = 2 * gb::self_draft_scratch_blocks(3, config.block_size);  // two drafting at once
  gb::Engine engine(f.model, f.tokenizer, std::move(watched), config);
  QVERIFY(engine.start().ok());
  const gb::KvCacheManager& kv = engine.scheduler().kv_cache();
  watch->kv = &kv;
  QCOMPARE(kv.num_lookahead_blocks(), config.num_scratch_blocks);
  QCOMPARE(kv.num_blocks(), engine.num_blocks() + config.num_scratch_blocks);

  std::vector<gb::RequestId> ids;
  // The third starts drafting when one of the first two has finished (so it runs longer).
  const std::pair<const char*, int> requests[] = {{"self:3:k=3", 30}, {"self:1:k=2", 30}, {"self:2:k=3", 90}};
  for (const auto& [spec, max_tokens] : requests) {
    gb::GenerationRequest r = greedy({1, 400, 300, 22}, max_tokens);
    r.speculative = spec_of(spec);
    auto id = engine.submit(r);
    QVERIFY2(id.ok(), id.ok() ? "" : id.error().message.c_str());
    ids.push_back(*id);
  }
  gb::GenerationRequest plain = greedy({1, 403, 407}, 30);
  QVERIFY(engine.submit(plain).ok());

  int max_lookahead_seen = 0;
  while (engine.has_work()) {
    auto stepped = engine.step();
    QVERIFY2(stepped.ok(), stepped.ok() ? "" : stepped.error().message.c_str());
    const gb::KvSnapshot snap = kv.snapshot();
    int lookahead = 0;
    for (const gb::KvBlockView& b : snap.blocks) {
      if (!b.lookahead) continue;
      ++lookahead;
      QCOMPARE(b.state, gb::BlockState::Owned);
      QCOMPARE(b.owners.size(), size_t{1});
      QVERIFY(std::find(ids.begin(), ids.end(), b.owners[0]) != ids.end());
    }
    QCOMPARE(lookahead, kv.num_lookahead_held());
    QVERIFY(lookahead <= kv.num_lookahead_blocks());
    max_lookahead_seen = std::max(max_lookahead_seen, lookahead);
  }
  QVERIFY2(watch->problems.empty(), watch->problems.empty() ? "" : watch->problems.front().c_str());
  QVERIFY(watch->num_layer_skipping_forwards > 0);
  QVERIFY(watch->num_checked > watch->num_layer_skipping_forwards);
  // The reserve lets two requests draft at once, never all three.
  QCOMPARE(max_lookahead_seen, config.num_scratch_blocks);
  for (gb::RequestId id : ids) QVERIFY(engine.speculative_stats(id)->drafted > 0);
  QCOMPARE(kv.num_lookahead_held(), 0);
  QCOMPARE(kv.num_owned(), 0);
  QVERIFY(kv.check_invariants().ok());
}
