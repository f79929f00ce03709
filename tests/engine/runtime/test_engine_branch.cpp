// Editing an earlier chat message or regenerating an answer forks the
// conversation at the right token (GenerationRequest::branch_from), on
// tiny-qwen2 with the Qwen2.5 template its GGUF carries. The common prefix is
// computed here, independently, from the two renderings' token ids; the engine
// must reuse exactly that many prompt tokens (the admission's cached count),
// share the full blocks of it and copy the partial one, prefill only the rest,
// name the old request as the parent, and produce the tokens a cold run of the
// edited conversation produces. With the parent's KV released the branch is
// still recorded but served by the prefix cache (whole blocks only).
#include <algorithm>
#include <cstdio>

#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "model/model.h"
#include "runtime/chat_request.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_engine_branch {

namespace {

struct Fixture {
  std::shared_ptr<const gb::Model> model;
  std::shared_ptr<const gb::Tokenizer> tokenizer;
};

std::optional<Fixture> load_qwen(const std::string& path) {
  gb::LoadOptions options;
  options.context_length = 512;
  auto model = gb::load_model(path, options);
  if (!model) return std::nullopt;
  auto tok = gb::load_tokenizer(**model, "");
  if (!tok) return std::nullopt;
  return Fixture{*model, *tok};
}

std::unique_ptr<gb::Engine> make_engine(const Fixture& f) {
  gb::EngineConfig config;
  config.check_invariants = true;
  config.block_size = 16;
  gb::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  auto engine = std::make_unique<gb::Engine>(f.model, f.tokenizer, gb::make_cpu_backend(f.model, cpu), config);
  GB_CHECK(engine->start().ok());
  return engine;
}

// What the events say about one request.
struct Seen {
  std::optional<gb::RequestId> parent;
  int32_t fork_position = -1;
  int32_t num_cached = -1;   // first admission
  int32_t num_prefilled = 0;
  int32_t num_shared_blocks = 0, num_copied_blocks = 0;
  std::vector<gb::TokenId> tokens;
};

Seen seen(const std::vector<gb::TraceEvent>& events, gb::RequestId id) {
  Seen s;
  for (const gb::TraceEvent& e : events) {
    if (const auto* sub = std::get_if<gb::RequestSubmittedEvent>(&e.body); sub && sub->request == id) {
      s.parent = sub->parent;
      s.fork_position = sub->fork_position;
    } else if (const auto* a = std::get_if<gb::RequestAdmittedEvent>(&e.body); a && a->request == id) {
      if (s.num_cached < 0) s.num_cached = a->num_cached_tokens;
    } else if (const auto* p = std::get_if<gb::PrefillChunkEvent>(&e.body); p && p->request == id) {
      s.num_prefilled += p->num_tokens;
    } else if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body); t && t->request == id) {
      s.tokens.push_back(t->token);
    } else if (const auto* kv = std::get_if<gb::KvTraceEvent>(&e.body); kv && kv->kv.request == id) {
      if (kv->kv.kind == gb::KvEventKind::Shared) ++s.num_shared_blocks;
      if (kv->kv.kind == gb::KvEventKind::Copied) ++s.num_copied_blocks;
    }
  }
  return s;
}

int32_t common_prefix(const std::vector<gb::TokenId>& a, const std::vector<gb::TokenId>& b) {
  int32_t n = 0;
  while (n < static_cast<int32_t>(std::min(a.size(), b.size())) && a[static_cast<size_t>(n)] == b[static_cast<size_t>(n)])
    ++n;
  return n;
}

gb::SamplerSettings sampling() {
  gb::SamplerSettings s;
  s.temperature = 0.8f;  // sampled, seeded: a fork must draw what a cold run draws
  s.seed = 11;
  s.max_tokens = 12;
  return s;
}

const std::vector<gb::ChatMessage> kOld = {{"system", "You are a helpful assistant.", {}},
                                           {"user", "Tell me something about the sea and its tides.", {}},
                                           {"assistant", "The sea rises and falls twice a day because of the moon.", {}},
                                           {"user", "And what about the sky at night?", {}}};

gb::ChatRequest render(const Fixture& f, const std::vector<gb::ChatMessage>& messages) {
  const gb::ChatFormatter formatter = gb::chat_formatter_for(*f.model, *f.tokenizer);
  gb::ChatRequest chat = gb::make_chat_request(formatter, *f.tokenizer, messages, sampling());
  chat.request.retain_kv = true;  // as the workbench submits
  return chat;
}

// Runs the old conversation, then `edited` as a branch of it; checks the reuse
// against the independently computed common prefix and a cold run.
void check_edit(const Fixture& f, const std::vector<gb::ChatMessage>& edited, bool release_first) {
  auto engine = make_engine(f);
  const gb::ChatRequest old_chat = render(f, kOld);
  auto old_id = engine->submit(old_chat.request);
  QVERIFY(old_id.ok());
  QVERIFY(engine->run_until_idle().ok());
  if (release_first) QVERIFY(engine->release(*old_id));
  engine->drain_events();

  gb::ChatRequest chat = render(f, edited);
  const int32_t common = common_prefix(old_chat.request.prompt_ids, chat.request.prompt_ids);
  const auto num_prompt = static_cast<int32_t>(chat.request.prompt_ids.size());
  QVERIFY2(common >= 16 && common < num_prompt, "the edit must leave a block-sized common prefix");
  chat.request.branch_from = {gb::RequestId{999}, *old_id};  // unknown candidates are ignored
  auto id = engine->submit(chat.request);
  QVERIFY(id.ok());
  QVERIFY(engine->run_until_idle().ok());
  const Seen s = seen(engine->drain_events(), *id);
  std::printf("branch%s: %d of %d prompt tokens in common, %d reused, %d prefilled\n",
              release_first ? " (parent released)" : "", common, num_prompt, s.num_cached, s.num_prefilled);
  QVERIFY(s.parent.has_value());
  QCOMPARE(s.parent->value, old_id->value);
  QCOMPARE(s.fork_position, common);
  const int32_t bs = engine->block_size();
  if (!release_first) {
    QCOMPARE(s.num_cached, common);                  // reused up to the exact token
    QCOMPARE(s.num_prefilled, num_prompt - common);  // only the rest is computed
    QCOMPARE(s.num_shared_blocks, common / bs);
    QCOMPARE(s.num_copied_blocks, common % bs != 0 ? 1 : 0);
  } else {
    QCOMPARE(s.num_cached, common / bs * bs);        // the prefix cache holds whole blocks
    QCOMPARE(s.num_shared_blocks, 0);
  }
  // The same tokens as the edited conversation run cold on a fresh engine.
  auto cold_engine = make_engine(f);
  auto cold_id = cold_engine->submit(render(f, edited).request);
  QVERIFY(cold_id.ok());
  QVERIFY(cold_engine->run_until_idle().ok());
  const Seen cold = seen(cold_engine->drain_events(), *cold_id);
  QCOMPARE(cold.num_cached, 0);
  QVERIFY(!s.tokens.empty());
  QCOMPARE(s.tokens, cold.tokens);
}

#define REQUIRE_QWEN(f)                                                              \
  GB_REQUIRE_SHARED(qwen_path, "models/tiny-qwen2/tiny-qwen2-F16.gguf");            \
  const std::optional<Fixture> f = load_qwen(qwen_path);                            \
  QVERIFY2(f.has_value(), "cannot load tiny-qwen2")

}  // namespace

GB_TEST(editing_the_last_user_message_forks_at_the_common_prefix) {
  REQUIRE_QWEN(f);
  std::vector<gb::ChatMessage> edited = kOld;
  edited[3].content = "And what about the stars at night?";
  check_edit(*f, edited, false);
}

GB_TEST(editing_an_earlier_user_message_forks_at_the_common_prefix) {
  REQUIRE_QWEN(f);
  // The first user message changes; the later turns are dropped (they stay on
  // the old branch).
  const std::vector<gb::ChatMessage> edited = {kOld[0], {"user", "Tell me something about the sea and its fish.", {}}};
  check_edit(*f, edited, false);
}

GB_TEST(a_branch_from_a_released_request_is_served_by_the_prefix_cache) {
  REQUIRE_QWEN(f);
  std::vector<gb::ChatMessage> edited = kOld;
  edited[3].content = "And what about the stars at night?";
  check_edit(*f, edited, true);
}

GB_TEST(regenerating_forks_the_whole_prompt_and_recomputes_its_last_token) {
  REQUIRE_QWEN(f);
  auto engine = make_engine(*f);
  const gb::ChatRequest chat = render(*f, kOld);
  auto first = engine->submit(chat.request);
  QVERIFY(first.ok());
  QVERIFY(engine->run_until_idle().ok());
  gb::ChatRequest again = render(*f, kOld);
  again.request.branch_from = {*first};
  auto second = engine->submit(again.request);
  QVERIFY(second.ok());
  QVERIFY(engine->run_until_idle().ok());
  const std::vector<gb::TraceEvent> events = engine->drain_events();
  const Seen a = seen(events, *first), b = seen(events, *second);
  const auto num_prompt = static_cast<int32_t>(chat.request.prompt_ids.size());
  QCOMPARE(b.parent->value, first->value);
  QCOMPARE(b.fork_position, num_prompt);
  QCOMPARE(b.num_cached, num_prompt - 1);
  QCOMPARE(b.num_prefilled, 1);
  QCOMPARE(b.tokens, a.tokens);  // same seed, same draws
}

GB_TEST(a_prompt_with_nothing_in_common_is_not_a_branch) {
  REQUIRE_QWEN(f);
  auto engine = make_engine(*f);
  auto first = engine->submit(render(*f, kOld).request);
  QVERIFY(first.ok());
  QVERIFY(engine->run_until_idle().ok());
  gb::ChatRequest other = render(*f, kOld);
  other.request.prompt_ids = {42, 43, 44};
  other.request.branch_from = {*first};
  auto id = engine->submit(other.request);
  QVERIFY(id.ok());
  QVERIFY(engine->run_until_idle().ok());
  const Seen s = seen(engine->drain_events(), *id);
  QVERIFY(!s.parent.has_value());
  QCOMPARE(s.num_cached, 0);
}

}  // namespace test_engine_branch
