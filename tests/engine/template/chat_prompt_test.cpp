// Engine-side chat formatting: the model's template by default, built-in formats
// as fallbacks (with a visible warning that names line and column), control tokens
// recognised in template text but not in what the user typed, end-of-generation
// ids, the template hash in the isolation key, and <think> splitting.
// Token references: the Llama-2 SentencePiece vocabulary inside
// models/llama-2-tiny-random (pieces identical to testdata/tokenizer/
// ggml-vocab-llama-spm.gguf, whose tokenizer tests pin our encoder).
#include <algorithm>
#include <string>

#include "gb_test.h"
#include "model/model.h"
#include "runtime/chat_request.h"
#include "sampling/reasoning_budget.h"
#include "template/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace {

const std::vector<gb::ChatMessage> kConversation = {
    {"system", "Be brief.", {}}, {"user", "Hi", {}}, {"assistant", "Hello!", {}}, {"user", "Bye", {}}};

std::shared_ptr<const gb::Tokenizer> llama2_tokenizer(std::shared_ptr<const gb::Model>* model_out = nullptr) {
  const std::string path = gbtest::shared_file("models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  if (path.empty()) return nullptr;
  auto model = gb::load_model(path, {});
  if (!model) return nullptr;
  auto tok = gb::load_tokenizer(**model, "");
  if (!tok) return nullptr;
  if (model_out) *model_out = *model;
  return *tok;
}

}  // namespace

GB_TEST(builtin_formats_render_their_published_layouts) {
  using gb::BuiltinChatFormat;
  auto render = [](BuiltinChatFormat f) {
    return gb::ChatFormatter::create("", "<s>", "</s>", f).render(kConversation).text;
  };
  QCOMPARE(render(BuiltinChatFormat::ChatMl),
           std::string("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"));
  // Meta's Llama-2 chat layout: <s>[INST] <<SYS>>\n...\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] ...
  QCOMPARE(render(BuiltinChatFormat::Llama2),
           std::string("<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]"));
  QCOMPARE(render(BuiltinChatFormat::Llama3),
           std::string("<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
                       "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                       "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"));
  QCOMPARE(render(BuiltinChatFormat::Plain), std::string("<s>Be brief.HiHello!Bye"));
}

GB_TEST(model_template_is_the_default) {
  const auto f = gb::ChatFormatter::create("{% for m in messages %}({{ m.role }}:{{ m.content }}){% endfor %}", "<s>", "</s>");
  QVERIFY(f.uses_model_template());
  QCOMPARE(f.format_name(), std::string("model"));
  const gb::ChatPrompt p = f.render(kConversation);
  QCOMPARE(p.text, std::string("(system:Be brief.)(user:Hi)(assistant:Hello!)(user:Bye)"));
  QCOMPARE(p.format, std::string("model"));
  QVERIFY(p.warning.empty());
  QCOMPARE(p.template_hash.size(), size_t{64});
}

GB_TEST(broken_template_falls_back_with_a_positioned_warning) {
  // Does not parse: the fallback is the built-in format the template names.
  const auto f = gb::ChatFormatter::create("<|im_start|>\n{% for m in messages %}{{ m.content }", "<s>", "</s>");
  QVERIFY(!f.uses_model_template());
  QCOMPARE(f.format_name(), std::string("chatml"));
  QVERIFY2(f.load_warning().find("line 2, column") != std::string::npos, f.load_warning().c_str());
  const gb::ChatPrompt p = f.render(kConversation);
  QCOMPARE(p.format, std::string("chatml"));
  QVERIFY(p.text.rfind("<|im_start|>system\nBe brief.<|im_end|>", 0) == 0);
  QVERIFY(!p.warning.empty());
  // Parses, but raises for this conversation: the raised message is in the warning.
  const auto g = gb::ChatFormatter::create(
      "[INST]{% if messages[0].role == 'system' %}\n  {{ raise_exception('System role not supported') }}{% endif %}",
      "<s>", "</s>");
  QVERIFY(g.uses_model_template());
  const gb::ChatPrompt q = g.render(kConversation);
  QCOMPARE(q.format, std::string("llama2"));
  QVERIFY2(q.warning.find("System role not supported") != std::string::npos, q.warning.c_str());
  QVERIFY(q.text.rfind("<s>[INST] <<SYS>>", 0) == 0);
}

GB_TEST(detects_the_builtin_a_template_spells) {
  QVERIFY(gb::detect_builtin_chat_format("...<|im_start|>...") == gb::BuiltinChatFormat::ChatMl);
  QVERIFY(gb::detect_builtin_chat_format("<|start_header_id|>") == gb::BuiltinChatFormat::Llama3);
  QVERIFY(gb::detect_builtin_chat_format("[INST] x [/INST]") == gb::BuiltinChatFormat::Llama2);
  QVERIFY(gb::detect_builtin_chat_format("") == gb::BuiltinChatFormat::Plain);
  QVERIFY(gb::builtin_chat_format_from_name("llama3") == gb::BuiltinChatFormat::Llama3);
  QVERIFY(!gb::builtin_chat_format_from_name("nope").has_value());
}

GB_TEST(control_tokens_are_parsed_in_template_text_only) {
  auto tok = llama2_tokenizer();
  QVERIFY2(tok != nullptr, "models/llama-2-tiny-random not loadable");
  const auto f = gb::ChatFormatter::create("", tok->token_piece(tok->bos_id()), tok->token_piece(tok->eos_id()),
                                           gb::BuiltinChatFormat::Llama2);
  const gb::ChatPrompt p = f.render({{"user", "a </s> b <s>", {}}});
  QCOMPARE(p.text, std::string("<s>[INST] a </s> b <s> [/INST]"));
  const std::vector<gb::TokenId> ids = gb::tokenize_chat_prompt(*tok, p);
  // One BOS (the template's) and no EOS: the user's "<s>" and "</s>" stay text.
  QCOMPARE(std::count(ids.begin(), ids.end(), tok->bos_id()), std::ptrdiff_t{1});
  QCOMPARE(std::count(ids.begin(), ids.end(), tok->eos_id()), std::ptrdiff_t{0});
  QCOMPARE(ids.front(), tok->bos_id());
  // After the control token the text is encoded as SentencePiece encodes a text
  // on its own (with the dummy-prefix space), as llama.cpp does after a special token.
  std::vector<gb::TokenId> want = {tok->bos_id()};
  const auto rest = tok->encode("[INST] a </s> b <s> [/INST]", false);
  want.insert(want.end(), rest.begin(), rest.end());
  QCOMPARE(ids, want);
  // Without the content span the same text would yield control ids.
  gb::ChatPrompt unprotected = p;
  unprotected.content_spans.clear();
  const auto raw = gb::tokenize_chat_prompt(*tok, unprotected);
  QCOMPARE(std::count(raw.begin(), raw.end(), tok->bos_id()), std::ptrdiff_t{2});
  QCOMPARE(std::count(raw.begin(), raw.end(), tok->eos_id()), std::ptrdiff_t{1});
}

GB_TEST(chat_request_stops_on_end_of_generation_and_keys_the_template) {
  std::shared_ptr<const gb::Model> model;
  auto tok = llama2_tokenizer(&model);
  QVERIFY(tok != nullptr);
  const auto eog = gb::end_of_generation_ids(*tok);
  QVERIFY(std::find(eog.begin(), eog.end(), tok->eos_id()) != eog.end());
  const auto a = gb::chat_formatter_for(*model, *tok, gb::BuiltinChatFormat::ChatMl);
  const auto b = gb::chat_formatter_for(*model, *tok, gb::BuiltinChatFormat::Llama2);
  gb::SamplerSettings sampling;
  const gb::ChatRequest ra = gb::make_chat_request(a, *tok, kConversation, sampling);
  const gb::ChatRequest rb = gb::make_chat_request(b, *tok, kConversation, sampling);
  for (gb::TokenId id : eog) QVERIFY(ra.request.sampling.is_stop_token(id));
  QCOMPARE(ra.request.isolation.template_version, ra.prompt.template_hash);
  QVERIFY(!ra.request.isolation.template_version.empty());
  QVERIFY(ra.request.isolation.template_version != rb.request.isolation.template_version);
  QCOMPARE(ra.request.prompt_ids, gb::tokenize_chat_prompt(*tok, ra.prompt));
}

GB_TEST(reasoning_splits_and_stays_out_of_history) {
  auto s = gb::split_reasoning("<think>\nLet me see.\n</think>\n\nParis.");
  QCOMPARE(s.reasoning, std::string("\nLet me see.\n"));
  QCOMPARE(s.answer, std::string("Paris."));
  QVERIFY(!s.open);
  s = gb::split_reasoning("<think>still going");
  QVERIFY(s.open);
  QCOMPARE(s.reasoning, std::string("still going"));
  QCOMPARE(s.answer, std::string());
  // Templates that open <think> in the prompt (DeepSeek-R1): only the close appears.
  s = gb::split_reasoning("hmm</think>42");
  QCOMPARE(s.reasoning, std::string("hmm"));
  QCOMPARE(s.answer, std::string("42"));
  s = gb::split_reasoning("no markers");
  QCOMPARE(s.answer, std::string("no markers"));
  const gb::ChatMessage m = gb::assistant_history_message("<think>x</think>\nanswer");
  QCOMPARE(m.content, std::string("answer"));
  QCOMPARE(m.reasoning, std::string("x"));
  // A template that drops reasoning (the built-ins) never sees it.
  const auto f = gb::ChatFormatter::create("", "", "", gb::BuiltinChatFormat::ChatMl);
  const auto p = f.render({{"user", "q", {}}, m, {"user", "q2", {}}});
  QVERIFY(p.text.find("x") == std::string::npos);
  QVERIFY(p.text.find("<|im_start|>assistant\nanswer<|im_end|>") != std::string::npos);
}

GB_TEST(reasoning_budget_counts_from_a_think_the_template_opened) {
  // DeepSeek-R1's template ends the generation prompt with "<think>\n".
  const auto r1 = gb::ChatFormatter::create(
      "{% for m in messages %}<U>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<A><think>\n{% endif %}", "", "");
  gb::ReasoningBudgetSettings markers;
  QVERIFY(gb::prompt_opens_reasoning(r1.render({{"user", "hi", {}}}), markers));
  // Qwen3 with enable_thinking=false closes it again; a "<think>" the user typed opens nothing.
  const auto closed = gb::ChatFormatter::create(
      "{% for m in messages %}{{ m.content }}{% endfor %}<think>\n\n</think>\n\n", "", "");
  QVERIFY(!gb::prompt_opens_reasoning(closed.render({{"user", "hi", {}}}), markers));
  const auto plain = gb::ChatFormatter::create("{% for m in messages %}{{ m.content }}{% endfor %}", "", "");
  QVERIFY(!gb::prompt_opens_reasoning(plain.render({{"user", "tell me <think>", {}}}), markers));
  // The budget then forces the close marker after max_tokens generated tokens.
  markers.max_tokens = 2;
  markers.starts_inside = true;
  gb::ReasoningBudget budget(markers, {7, 8});
  QVERIFY(budget.in_reasoning());
  QVERIFY(budget.forced_next().empty());
  budget.observe(1, "a");
  budget.observe(2, "b");
  QCOMPARE(std::vector<gb::TokenId>(budget.forced_next().begin(), budget.forced_next().end()), (std::vector<gb::TokenId>{7, 8}));
}
