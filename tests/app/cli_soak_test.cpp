// `glassbox-cli soak` from outside: a short soak on stories260K passes every
// check and exercises what it claims (forks, regenerations, speculative
// requests, cancels, preemptions, one invariant sweep per step, a replay per
// request, nothing owned at the end); a soak whose replay check is made to see a
// wrong token fails with the request named; bad options are refused clearly.
#include <regex>

#include "cli_runner.h"
#include "gb_test.h"

namespace {

long long field(const std::string& text, const std::string& name) {
  const std::regex re(name + " (\\d+)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return -1;
  return std::stoll(m[1].str());
}

}  // namespace

GB_TEST(short_soak_passes_every_check) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto r = gbtest::run_cli("soak --model " + gbtest::quote(model) + " --requests 250 --seed 11", false);
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  QVERIFY2(r.output.rfind("soak: ok;", 0) == 0, r.output.c_str());
  QCOMPARE(field(r.output, "requests"), 250LL);
  for (const char* what : {"forks", "regenerations", "speculative", "cancels", "preemptions", "replays"})
    QVERIFY2(field(r.output, what) > 0, (std::string(what) + " missing or zero: " + r.output).c_str());
  // One sweep per step (plus the final one), and every request but the
  // not-comparable ones replayed.
  QVERIFY2(field(r.output, "invariant checks") > field(r.output, "steps"), r.output.c_str());
  QVERIFY2(field(r.output, "replays") > 200, r.output.c_str());
  QCOMPARE(field(r.output, "replay mismatches"), 0LL);
  QCOMPARE(field(r.output, "blocks owned at end"), 0LL);
}

// Half the requests evict their KV cache (sink, h2o, snapkv at random
// budgets): preempted and recomputed, batched with the others, they must
// still finish with the tokens of their replay alone.
GB_TEST(soak_with_a_kv_policy_mix_replays_exactly) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto r = gbtest::run_cli("soak --model " + gbtest::quote(model) + " --requests 200 --seed 1 --kv-policy-mix 0.5",
                                 false);
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  QVERIFY2(r.output.rfind("soak: ok;", 0) == 0, r.output.c_str());
  QVERIFY2(field(r.output, "evicting") > 40, r.output.c_str());
  QVERIFY2(field(r.output, "preemptions") > 20, r.output.c_str());
  QCOMPARE(field(r.output, "replay mismatches"), 0LL);
  QCOMPARE(field(r.output, "blocks owned at end"), 0LL);
}

GB_TEST(a_wrong_token_fails_the_soak_and_names_the_request) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto r = gbtest::run_cli("soak --model " + gbtest::quote(model) + " --requests 20 --seed 3 --inject-mismatch");
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.output.find("tokens differ from its replay alone") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("soak: FAILED;") != std::string::npos, r.output.c_str());
  QCOMPARE(field(r.output, "replay mismatches"), 1LL);
}

GB_TEST(bad_soak_options_are_refused_clearly) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  auto r = gbtest::run_cli("soak --model " + gbtest::quote(model) + " --requests 0");
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.output.find("--requests must be at least 1") != std::string::npos, r.output.c_str());
  r = gbtest::run_cli("soak --model /nonexistent/model.bin --requests 5");
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.output.find("/nonexistent/model.bin") != std::string::npos, r.output.c_str());
}
