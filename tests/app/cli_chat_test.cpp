// glassbox-cli generate --chat and chat (the interactive terminal chat), run as
// subprocesses on the shared models. The prompt ids are checked against the
// tokenizer on its own (`tokenize`, pinned by the tokenizer vector tests).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"
#include "gb_test.h"

namespace {

nlohmann::json first_line_json(const std::string& out) {
  return nlohmann::json::parse(out.substr(0, out.find('\n')));
}

}  // namespace

GB_TEST(generate_chat_renders_one_user_turn_with_the_given_template) {
  GB_REQUIRE_SHARED(model, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  const std::string tpl = gbtest::write_temp_file(
      "t.jinja", "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}");
  const auto r = gbtest::run_cli_split("generate --model '" + model + "' --chat --chat-template '" + tpl +
                                       "' --system 'Be brief.' --prompt 'Hi <s> there' -n 3 --json --threads 1");
  QVERIFY2(r.exit_code == 0, r.err.c_str());
  const auto ids = first_line_json(r.out)["prompt_ids"].get<std::vector<int>>();
  // Reference: the same text through `tokenize` (BOS + SentencePiece encoding).
  const gbtest::CliResult ref = gbtest::run_cli("tokenize --model '" + model + "' --text '[system] Be brief.[user] Hi <s> there'", false);
  std::istringstream first_line(ref.output.substr(0, ref.output.find('\n')));
  std::vector<int> want;
  for (int id; first_line >> id;) want.push_back(id);
  QCOMPARE(ids, want);
  QCOMPARE(std::count(ids.begin(), ids.end(), 1), std::ptrdiff_t{1});  // the user's "<s>" is text
}

GB_TEST(generate_chat_falls_back_with_a_warning_when_the_template_raises) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string tpl =
      gbtest::write_temp_file("t.jinja", "<|im_start|>{{ raise_exception('no system role') if messages|length > 1 }}");
  const auto r = gbtest::run_cli_split("generate --model '" + model + "' --chat --chat-template '" + tpl +
                                       "' --system S --prompt 'Once upon a time' -n 4 --threads 1");
  QVERIFY2(r.exit_code == 0, r.err.c_str());
  QVERIFY2(r.err.find("warning: the model's chat template failed: no system role; using the built-in chatml") !=
               std::string::npos, r.err.c_str());
}

GB_TEST(generate_chat_without_a_template_uses_the_plain_format) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto chat = gbtest::run_cli_split("generate --model '" + model +
                                          "' --chat --prompt 'Once upon a time' -n 8 --json --threads 1");
  const auto plain =
      gbtest::run_cli_split("generate --model '" + model + "' --prompt 'Once upon a time' -n 8 --json --threads 1");
  QVERIFY2(chat.exit_code == 0 && plain.exit_code == 0, chat.err.c_str());
  // stories260K has no template: plain = BOS + the text, so the same ids as plain generate.
  QCOMPARE(first_line_json(chat.out)["prompt_ids"], first_line_json(plain.out)["prompt_ids"]);
}

GB_TEST(chat_runs_turns_and_reuses_the_kv_prefix) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto r = gbtest::run_cli_split("chat --model '" + model + "' --chat-format chatml -n 6 --stats --threads 1",
                                       "Once upon a time\n/prompt\nThe end\n");
  QVERIFY2(r.exit_code == 0, r.err.c_str());
  QVERIFY2(r.err.find("chat format: chatml") != std::string::npos, r.err.c_str());
  QVERIFY2(r.err.find("[turn 1: 45 prompt tokens, 0 cached") != std::string::npos, r.err.c_str());
  // Turn 2's prompt starts with turn 1's prompt and reply: whole KV blocks come from the cache.
  const size_t at = r.err.find("[turn 2: ");
  QVERIFY2(at != std::string::npos, r.err.c_str());
  int prompt = 0, cached = 0;
  QVERIFY(std::sscanf(r.err.c_str() + at, "[turn 2: %d prompt tokens, %d cached", &prompt, &cached) == 2);
  QVERIFY2(cached >= 32 && cached < prompt, r.err.c_str());
  // /prompt printed the rendered prompt of turn 1 (control tokens as written).
  QVERIFY(r.out.find("<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n") != std::string::npos);
}
