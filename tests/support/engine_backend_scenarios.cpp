// The engine scenarios of engine_backend_scenarios.h: each builds its model,
// EngineConfig, driver and "exercised" check, then hands them to
// check_scenario (engine_backend_compare.h).
#include "engine_backend_scenarios.h"

#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gb_test.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "synthetic_fixture.h"
#include "runtime/engine.h"
#include "speculative/speculative_config.h"
#include "stories_fixture.h"
#include "tokenizer/tokenizer.h"

namespace gbtest {

namespace engine_scenarios_detail {
namespace {

// A prompt of `n` tokens: `first` (stories260K's BOS, or none when -1), then a
// seeded mix of ids in [lo, 511].
std::vector<gb::TokenId> seeded_prompt(int n, uint32_t seed, gb::TokenId lo = 259, gb::TokenId first = 1) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<gb::TokenId> pick(lo, 511);
  std::vector<gb::TokenId> p;
  if (first >= 0) p.push_back(first);
  while (static_cast<int>(p.size()) < n) p.push_back(pick(rng));
  return p;
}

// Submits every request, then steps until the engine is idle.
std::function<gb::Status(gb::Engine&)> submit_all(std::vector<gb::GenerationRequest> requests) {
  return [requests = std::move(requests)](gb::Engine& engine) -> gb::Status {
    for (const gb::GenerationRequest& r : requests) GB_TRY(engine.submit(r));
    return engine.run_until_idle();
  };
}

// The requests in submission order (ids increase).
std::vector<const RequestOutput*> in_order(const EngineRun& run) {
  std::vector<const RequestOutput*> out;
  for (const auto& [id, o] : run.requests) out.push_back(&o);
  return out;
}

std::string need(bool ok, const std::string& what) { return ok ? std::string() : what; }

// stories260K with its tokenizer; fails the test (empty scenario model) when missing.
Scenario stories_scenario(const std::string& name) {
  Scenario s;
  s.name = name;
  const StoriesFixture f = load_stories();
  s.model = f.model;
  s.tokenizer = f.tokenizer;
  return s;
}

struct GoldenCase {
  std::vector<gb::TokenId> prompt, generated;
  int32_t max_tokens = 0;
};

// A golden file of ../shared/testdata/golden (run.c's greedy output).
GoldenCase read_golden_case(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json g = nlohmann::json::parse(in);
  GoldenCase c;
  c.prompt = g["prompt_tokens"].get<std::vector<gb::TokenId>>();
  c.generated = g["generated_tokens"].get<std::vector<gb::TokenId>>();
  c.max_tokens = g["steps"].get<int32_t>() - static_cast<int32_t>(c.prompt.size()) + 1;  // run.c counts positions
  return c;
}

const char* const kGoldenFiles[] = {"testdata/golden/once_upon_a_time_n64.json",
                                    "testdata/golden/once_upon_a_time_n256.json",
                                    "testdata/golden/lily_cake_n256.json"};

std::shared_ptr<const gb::Model> synth_model(const std::string& arch_name) {
  return gbtest::synthetic_arch_model(arch_name);
}

Scenario synth_scenario(const std::string& name, const std::string& arch) {
  Scenario s;
  s.name = name;
  s.model = synth_model(arch);
  auto tokenizer = gb::load_tokenizer(*s.model, "");
  GB_CHECK(tokenizer.ok());
  s.tokenizer = *tokenizer;
  return s;
}

// Steps `engine` until request `id` holds at least `n` tokens.
gb::Status step_until_tokens(gb::Engine& engine, gb::RequestId id, size_t n) {
  while (engine.live_tokens(id).size() < n) {
    if (!engine.is_live(id)) return gb::make_error("request " + std::to_string(id.value) + " ended early");
    GB_TRY(engine.step());
  }
  return {};
}

// Forks of a running parent, of the finished (retained) parent and of a fork,
// and a submitted branch of the parent (an edited chat message), each at a
// position inside a block (block size 16): full blocks shared, the partial
// block copied.
gb::Status drive_forks(gb::Engine& engine) {
  gb::GenerationRequest parent_req = greedy_request(seeded_prompt(30, 21), 40);
  parent_req.retain_kv = true;
  auto parent = engine.submit(parent_req);
  GB_TRY(parent);
  GB_TRY(engine.submit(greedy_request(seeded_prompt(18, 22), 50)));  // a neighbour in every batch
  GB_TRY(step_until_tokens(engine, *parent, 30 + 12));
  std::vector<gb::TokenId> edited = engine.live_tokens(*parent);
  auto running_child = engine.fork(*parent, 39, gb::TokenId{300}, 20);  // 2 blocks shared, 7 tokens copied
  GB_TRY(running_child);
  GB_TRY(engine.run_until_idle());
  GB_TRY(engine.fork(*parent, 63, std::nullopt, 12));                 // 3 blocks shared, 14 tokens copied
  GB_TRY(engine.fork(*running_child, 49, gb::TokenId{301}, 10));      // a fork of a fork
  edited.resize(40);                                                  // 2 blocks shared, 8 tokens copied
  edited.insert(edited.end(), {400, 401, 402});
  gb::GenerationRequest branch = greedy_request(edited, 15);
  branch.branch_from = {*parent};
  GB_TRY(engine.submit(branch));
  return engine.run_until_idle();
}

// Two stories260K requests with drafters, for check_speculative.
gb::GenerationRequest speculative_request(std::vector<gb::TokenId> prompt, const std::string& spec) {
  gb::GenerationRequest r = greedy_request(std::move(prompt), 80);
  auto config = gb::parse_speculative_spec(spec);
  GB_CHECK_MSG(config.ok(), config.ok() ? nullptr : config.error().message.c_str());
  config->timing_fallback = false;  // drafting choices from tokens alone, never from timings
  r.speculative = *config;
  return r;
}

gb::EngineConfig window_pool(int32_t num_blocks, int32_t block_size) {
  gb::EngineConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.max_seqs = 4;
  c.max_context = 256;
  c.release_window_blocks = true;
  return c;
}

// Mistral-style: every layer slides (window 8); two requests of 112 and 120
// positions in 12 blocks of 4 (48 slots) run only because blocks that left
// the window go back to the pool.
void check_mistral_release(const BackendPair& pair) {
  Scenario s = synth_scenario("sliding window (mistral)", "mistral");
  QVERIFY(s.model->config.kv_release_window() > 0);
  s.config = window_pool(12, 4);
  s.drive = submit_all({greedy_request(seeded_prompt(12, 5, 3, -1), 100), greedy_request(seeded_prompt(20, 6, 3, -1), 100)});
  s.exercised = [](const EngineRun& run) {
    return need(run.counts.window_released >= 40,
                "blocks released by the window: " + std::to_string(run.counts.window_released) + ", expected >= 40");
  };
  check_scenario(s, pair);
}

// Gemma 3-style: global layers keep every block; the sliding layers keep a
// window group of their own where the backend supports it.
void check_gemma3_window_group(const BackendPair& pair) {
  Scenario s = synth_scenario("sliding window (gemma3)", "gemma3");
  QVERIFY(s.model->config.has_window_group());
  s.config = window_pool(96, 4);
  s.drive = submit_all({greedy_request(seeded_prompt(10, 3, 3, -1), 120), greedy_request(seeded_prompt(14, 4, 3, -1), 100)});
  s.exercised = [](const EngineRun& run) {
    if (!run.supports_window_group)  // the CUDA backend: one table for every layer, nothing released
      return need(!run.window_group && run.counts.window_group_released == 0, "a window group on a backend without one");
    return need(run.window_group && run.counts.window_group_released >= 40,
                "window group releases: " + std::to_string(run.counts.window_group_released) + ", expected >= 40");
  };
  check_scenario(s, pair);
}

}  // namespace
}  // namespace engine_scenarios_detail

using namespace engine_scenarios_detail;

void check_golden_prompts_batched(const BackendPair& pair) {
  Scenario s = stories_scenario("golden prompts batched");
  if (!s.model) QFAIL("cannot load models/stories260K/stories260K.bin from the shared dir");
  std::vector<GoldenCase> goldens;
  for (const char* rel : kGoldenFiles) {
    GB_REQUIRE_SHARED(path, rel);
    goldens.push_back(read_golden_case(path));
  }
  std::vector<gb::GenerationRequest> requests;
  for (const GoldenCase& g : goldens) {
    requests.push_back(greedy_request(g.prompt, g.max_tokens, 10));
    requests.back().ignore_eos = false;  // as run.c: BOS stops
  }
  // A 65-token prompt (a golden prompt and its story) prefilled in chunks
  // beside the decodes.
  std::vector<gb::TokenId> long_prompt = goldens[0].prompt;
  long_prompt.insert(long_prompt.end(), goldens[0].generated.begin(), goldens[0].generated.begin() + 55);
  requests.push_back(greedy_request(long_prompt, 40));
  s.config.num_blocks = 128;
  s.config.max_batch_tokens = 16;
  s.drive = submit_all(requests);
  s.exercised = [goldens](const EngineRun& run) {
    const EngineCounts& c = run.counts;
    std::string missing = need(c.max_chunks_per_request >= 4, "no prompt prefilled in 4 or more chunks") +
                          need(c.max_seqs_in_step == 4, " no step batched all 4 requests") +
                          need(c.mixed_steps > 0, " no step mixed prefill and decode");
    const std::vector<const RequestOutput*> outs = in_order(run);
    for (size_t i = 0; i < goldens.size() && i < outs.size(); ++i)
      missing += need(outs[i]->tokens == goldens[i].generated, " request " + std::to_string(i) + " differs from " + kGoldenFiles[i]);
    return missing;
  };
  check_scenario(s, pair);
}

void check_forks(const BackendPair& pair) {
  Scenario s = stories_scenario("forks");
  if (!s.model) QFAIL("cannot load models/stories260K/stories260K.bin from the shared dir");
  s.config.num_blocks = 64;
  s.config.block_size = 16;
  s.config.max_batch_tokens = 64;
  s.drive = drive_forks;
  s.exercised = [](const EngineRun& run) {
    const EngineCounts& c = run.counts;
    std::string missing = need(c.forks == 4, "forks: " + std::to_string(c.forks) + ", expected 4") +
                          need(c.shared_blocks >= 2 + 3 + 3 + 2, " shared blocks: " + std::to_string(c.shared_blocks)) +
                          need(c.copied_blocks >= 4, " copied blocks: " + std::to_string(c.copied_blocks));
    const std::vector<const RequestOutput*> outs = in_order(run);
    const size_t expected[] = {40, 50, 20, 12, 10, 15};
    missing += need(outs.size() == 6, " requests: " + std::to_string(outs.size()));
    for (size_t i = 0; i < outs.size() && i < 6; ++i)
      missing += need(outs[i]->tokens.size() == expected[i], " request " + std::to_string(i) + " is short");
    return missing;
  };
  check_scenario(s, pair);
}

void check_preemption(const BackendPair& pair) {
  Scenario s = stories_scenario("preemption");
  if (!s.model) QFAIL("cannot load models/stories260K/stories260K.bin from the shared dir");
  s.config.num_blocks = 10;  // 160 token slots for 4 requests of ~100 positions each
  s.config.block_size = 16;
  std::vector<gb::GenerationRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(greedy_request(seeded_prompt(10 + 5 * i, 10 + static_cast<uint32_t>(i)), 80));
  s.drive = submit_all(requests);
  s.exercised = [](const EngineRun& run) { return need(run.counts.preemptions > 0, "no request was preempted"); };
  check_scenario(s, pair);
}

void check_sliding_window(const BackendPair& pair) {
  check_mistral_release(pair);
  if (QTest::currentTestFailed()) return;
  check_gemma3_window_group(pair);
}

void check_speculative(const BackendPair& pair) {
  Scenario s = stories_scenario("speculative decoding");
  if (!s.model) QFAIL("cannot load models/stories260K/stories260K.bin from the shared dir");
  GB_REQUIRE_SHARED(golden, kGoldenFiles[2]);
  GB_REQUIRE_SHARED(draft, "models/stories260K/stories260K_L4_draft.bin");
  const std::vector<gb::TokenId> prompt = read_golden_case(golden).prompt;
  s.config.num_blocks = 128;
  s.config.num_scratch_blocks = 64;  // self-drafting's lookahead reserve
  s.config.max_batch_tokens = 64;
  s.drive = submit_all({speculative_request(prompt, "draft:" + draft + ":k=3"), speculative_request(prompt, "ngram:n=2,k=4"),
                        speculative_request(seeded_prompt(20, 31), "self:3:k=3"), greedy_request(prompt, 60)});
  s.exercised = [](const EngineRun& run) {
    std::string missing = need(run.counts.accepted > 0, "no drafted token was accepted");
    const std::vector<const RequestOutput*> outs = in_order(run);
    for (size_t i = 0; i < 3 && i < outs.size(); ++i)
      missing += need(outs[i]->num_verifications > 0, " speculative request " + std::to_string(i) + " never verified a draft");
    return missing;
  };
  check_scenario(s, pair);
}

void check_token_records(const BackendPair& pair) {
  constexpr int32_t kTopN = 32;
  Scenario s = stories_scenario("token records");
  if (!s.model) QFAIL("cannot load models/stories260K/stories260K.bin from the shared dir");
  GB_REQUIRE_SHARED(golden, kGoldenFiles[2]);
  s.config.num_blocks = 64;
  s.drive = submit_all({greedy_request(read_golden_case(golden).prompt, 200, kTopN),
                        greedy_request(seeded_prompt(40, 7), 120, kTopN)});
  s.exercised = [](const EngineRun& run) {
    int64_t bad = 0;
    for (const auto& [id, o] : run.requests)
      for (const gb::TokenRecord& r : o.records)
        bad += r.top.size() != static_cast<size_t>(kTopN) || r.chosen != r.top.front().id || r.chosen_rank != 0 ||
               !(r.entropy_before > 0.0f) || !(r.chosen_prob_before > 0.0f && r.chosen_prob_before <= 1.0f);
    return need(run.counts.records == 320 && run.counts.tokens == 320,
                "records: " + std::to_string(run.counts.records) + " of " + std::to_string(run.counts.tokens) + " tokens") +
           need(bad == 0, " " + std::to_string(bad) + " records without " + std::to_string(kTopN) +
                              " candidates, the greedy choice first, a positive entropy and probability");
  };
  check_scenario(s, pair);
}

}  // namespace gbtest
