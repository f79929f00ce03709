// The grammar stage in the engine, on stories260K: every answer under a format
// is a sentence of it (checked with std::regex, independent of the grammar
// engine), the records show the stage, plain greedy and every drafter give the
// same tokens under a format, forks continue from the parent's grammar state,
// a forced token the format forbids ends the request as "grammar_dead_end",
// and a format that does not compile is refused at submit.
#include <regex>
#include <string>
#include <vector>

#include "spec_engine_support.h"

namespace grammar_engine_test {

namespace {

using namespace spectest;

// Words after "Once", then a full stop: a regular language, so std::regex
// can decide membership on its own.
const char* const kWordsGbnf = "root ::= \"Once\" ( \" \" word ){3,12} \".\"\nword ::= [a-z]{1,8}\n";
const std::regex kWordsRegex("Once( [a-z]{1,8}){3,12}\\.");

gb::GenerationRequest words_request(const Fixture& f, float temperature, uint64_t seed) {
  gb::GenerationRequest r;
  r.prompt_ids = f.tokenizer->encode("Lily said:", true);
  r.sampling.temperature = temperature;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  r.sampling.seed = seed;
  r.sampling.max_tokens = 200;
  r.sampling.format = {gb::FormatKind::Gbnf, kWordsGbnf};
  return r;
}

struct Run {
  std::string reason;
  std::string text;
  std::vector<gb::TokenId> tokens;
  std::vector<gb::TokenRecord> records;
};

Run collect_run(const std::vector<gb::TraceEvent>& events, gb::RequestId id) {
  Run run;
  for (const gb::TraceEvent& e : events) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body); t && t->request == id) {
      run.tokens.push_back(t->token);
      run.records.push_back(t->record);
    } else if (const auto* fin = std::get_if<gb::RequestFinishedEvent>(&e.body); fin && fin->request == id) {
      run.reason = fin->reason;
      run.text = fin->text;
    }
  }
  return run;
}

Run run_one(const Fixture& f, const gb::GenerationRequest& r) {
  auto engine = make_engine(f);
  auto id = engine->submit(r);
  GB_CHECK_MSG(id.ok(), id.ok() ? nullptr : id.error().message.c_str());
  GB_CHECK(engine->run_until_idle().ok());
  return collect_run(engine->drain_events(), *id);
}

}  // namespace

GB_TEST(grammar_every_sampled_answer_is_a_sentence) {
  REQUIRE_FIXTURE(f);
  int num_forced = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const Run run = run_one(f, words_request(f, 1.0f, seed));
    QCOMPARE(run.reason, std::string("stop"));  // the full stop leaves only end of generation
    QVERIFY2(std::regex_match(run.text, kWordsRegex), run.text.c_str());
    QVERIFY(!run.records.empty());
    for (const gb::TokenRecord& rec : run.records) {
      QVERIFY(rec.grammar.has_value());
      QCOMPARE(rec.stages.front(), gb::SamplerStage::Grammar);
      QVERIFY(rec.stage_active.front() == 1);
      QVERIFY(rec.grammar->num_allowed >= 1);
      QCOMPARE(rec.num_candidates_after_stage.front(), rec.grammar->num_allowed);  // stories has no -inf logits
      QVERIFY(rec.grammar->mass_allowed > 0.0f && rec.grammar->mass_allowed <= 1.0f);
      QVERIFY(!rec.grammar->state.empty());
      num_forced += rec.grammar->num_allowed == 1;
      // The chosen token's final probability is its raw probability renormalized
      // over the allowed mass (temperature 1, no other stage active).
      const double expect = rec.chosen_prob_before / rec.grammar->mass_allowed;
      QVERIFY2(std::abs(rec.chosen_prob - expect) <= 1e-3 * expect + 1e-6, run.text.c_str());
    }
  }
  qInfo("%d forced tokens", num_forced);
}

GB_TEST(grammar_drafts_give_the_plain_greedy_tokens) {
  REQUIRE_FIXTURE(f);
  const Run plain = run_one(f, words_request(f, 0.0f, 1));
  QVERIFY2(std::regex_match(plain.text, kWordsRegex), plain.text.c_str());
  for (const auto& [name, config] : all_drafters(f)) {
    gb::GenerationRequest r = words_request(f, 0.0f, 1);
    r.speculative = config;
    const Run spec = run_one(f, r);
    QVERIFY2(spec.tokens == plain.tokens, (name + ": tokens differ from plain greedy under the format").c_str());
    QCOMPARE(spec.reason, plain.reason);
  }
  // Sampled with a drafter: still a sentence of the format every time.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    gb::GenerationRequest r = words_request(f, 1.0f, seed);
    r.speculative = spec_of("draft:" + f.model_path + ":k=4");
    const Run spec = run_one(f, r);
    QVERIFY2(std::regex_match(spec.text, kWordsRegex), spec.text.c_str());
  }
}

GB_TEST(grammar_fork_continues_the_parents_state) {
  REQUIRE_FIXTURE(f);
  auto engine = make_engine(f);
  gb::GenerationRequest r = words_request(f, 1.0f, 5);
  r.retain_kv = true;
  auto parent = engine->submit(r);
  QVERIFY(parent.ok());
  QVERIFY(engine->run_until_idle().ok());
  const Run p = collect_run(engine->drain_events(), *parent);
  QVERIFY2(std::regex_match(p.text, kWordsRegex), p.text.c_str());
  QVERIFY(p.tokens.size() >= 4);
  const int32_t num_prompt = static_cast<int32_t>(r.prompt_ids.size());
  for (int32_t keep : {1, 2, static_cast<int32_t>(p.tokens.size()) / 2}) {
    gb::SamplerSettings s = r.sampling;
    s.seed = 100 + static_cast<uint64_t>(keep);
    auto child = engine->fork_with_settings(*parent, num_prompt + keep, s, false);
    QVERIFY2(child.ok(), child.ok() ? "" : child.error().message.c_str());
    QVERIFY(engine->run_until_idle().ok());
    const Run c = collect_run(engine->drain_events(), *child);
    const std::vector<gb::TokenId> before(p.tokens.begin(), p.tokens.begin() + keep);
    const std::string whole = f.tokenizer->decode(before) + c.text;
    QVERIFY2(std::regex_match(whole, kWordsRegex), whole.c_str());
  }
}

GB_TEST(grammar_forced_token_outside_the_format_is_a_dead_end) {
  REQUIRE_FIXTURE(f);
  gb::GenerationRequest r = words_request(f, 1.0f, 3);
  r.sampling.format = {gb::FormatKind::Gbnf, "root ::= [a-z ]+\n"};
  // A reasoning budget of 0 inside a thinking region forces its close marker
  // first, which this format does not allow.
  r.sampling.reasoning.max_tokens = 0;
  r.sampling.reasoning.starts_inside = true;
  r.sampling.reasoning.close_marker = "Z";
  const Run run = run_one(f, r);
  QCOMPARE(run.reason, std::string("grammar_dead_end"));
  QVERIFY2(std::regex_match(run.text, std::regex("[a-z ]*")), run.text.c_str());  // "Z" never got out
}

GB_TEST(grammar_bad_formats_are_refused_at_submit) {
  REQUIRE_FIXTURE(f);
  auto engine = make_engine(f);
  gb::GenerationRequest r = words_request(f, 1.0f, 1);
  r.sampling.format = {gb::FormatKind::Gbnf, "root ::= word\n"};
  auto id = engine->submit(r);
  QVERIFY(!id.ok());
  QVERIFY2(id.error().message.find("undefined rule 'word'") != std::string::npos, id.error().message.c_str());
  QVERIFY2(id.error().message.find("line 1, column 10") != std::string::npos, id.error().message.c_str());
  r.sampling.format = {gb::FormatKind::JsonSchema, R"({"type":"object","patternProperties":{"a":{}}})"};
  id = engine->submit(r);
  QVERIFY(!id.ok());
  QVERIFY2(id.error().message.find("patternProperties") != std::string::npos, id.error().message.c_str());
  r.sampling.format = {gb::FormatKind::Regex, "(a"};
  QVERIFY(!engine->submit(r).ok());
  r.sampling.format = {gb::FormatKind::JsonSchema, "{not json"};
  QVERIFY(!engine->submit(r).ok());
  QVERIFY(!engine->has_work());
}

}  // namespace grammar_engine_test
