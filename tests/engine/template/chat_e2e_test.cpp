// End to end on real vocabularies and the templates their GGUF files carry:
// tiny-qwen2 (Qwen2.5 template, byte-level BPE) and tiny-llama3 (Llama-3 template,
// byte-level BPE). The references are the `chat` prompts of each model's
// refs/*.json (models/*/README.md): the text and its ids from the Hugging Face
// tokenizer with special tokens parsed (Llama 3 with BOS added by the tokenizer,
// Qwen without BOS), confirmed by llama.cpp. A system + user conversation with
// add_generation_prompt must render to that text (Llama 3's template spells the
// BOS itself) and tokenize to exactly those ids.
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "gb_test.h"
#include "model/gguf_file.h"
#include "model/gguf_vocabulary.h"
#include "model/model.h"
#include "runtime/chat_request.h"
#include "template/model_chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Reference {
  std::string text;
  std::vector<gb::TokenId> ids;
};

Reference chat_reference(const std::string& json_path) {
  std::ifstream in(json_path);
  const auto j = nlohmann::json::parse(in);
  for (const auto& p : j["prompts"])
    if (p["name"] == "chat") return {p["text"].get<std::string>(), p["ids"].get<std::vector<gb::TokenId>>()};
  return {};
}

// The file's vocabulary (metadata only: no weights are needed).
std::optional<gb::Vocabulary> vocabulary_of(const std::string& path) {
  gb::GgufReadOptions options;
  options.metadata_only = true;
  auto file = gb::GgufFile::open(path, options);
  if (!file) return std::nullopt;
  auto vocab = gb::vocabulary_from_gguf(*file);
  if (!vocab) return std::nullopt;
  return std::move(vocab).value();
}

void check_model(const std::string& name, bool template_spells_bos) {
  GB_REQUIRE_SHARED(path, "models/" + name + "/" + name + "-F16.gguf");
  GB_REQUIRE_SHARED(refs, "models/" + name + "/refs/" + name + "-F16.json");
  const Reference ref = chat_reference(refs);
  QVERIFY(!ref.ids.empty());
  auto tpl = gb::read_model_chat_template(path);
  QVERIFY(tpl.ok() && !tpl->empty());
  std::optional<gb::Vocabulary> vocab = vocabulary_of(path);
  QVERIFY(vocab.has_value());
  auto tokenizer = gb::create_gguf_tokenizer(*vocab, path);
  QVERIFY2(tokenizer.ok(), tokenizer.ok() ? "" : tokenizer.error().message.c_str());
  const std::string bos = (*tokenizer)->token_piece((*tokenizer)->bos_id());
  const std::string eos = (*tokenizer)->token_piece((*tokenizer)->eos_id());
  const gb::ChatFormatter formatter = gb::ChatFormatter::create(*tpl, bos, eos);
  QVERIFY2(formatter.uses_model_template(), formatter.load_warning().c_str());
  const std::vector<gb::ChatMessage> messages = {{"system", "You are a helpful assistant.", {}},
                                                 {"user", "What is 2+2?", {}}};
  const gb::ChatPrompt prompt = formatter.render(messages);
  QVERIFY2(prompt.warning.empty(), prompt.warning.c_str());
  QCOMPARE(prompt.text, (template_spells_bos ? bos : std::string()) + ref.text);

  const std::vector<gb::TokenId> ids = gb::tokenize_chat_prompt(**tokenizer, prompt);
  QCOMPARE(ids, ref.ids);
  // The request the CLI and workbench submit carries those ids and stops at the
  // turn's end token (<|im_end|> / <|eot_id|>).
  const gb::ChatRequest request = gb::make_chat_request(formatter, **tokenizer, messages, {});
  QCOMPARE(request.request.prompt_ids, ref.ids);
  QVERIFY(request.request.sampling.is_stop_token(ref.ids[template_spells_bos ? 11 : 9]));
}

}  // namespace

GB_TEST(tiny_qwen2_chat_prompt_matches_the_reference_ids) { check_model("tiny-qwen2", false); }
GB_TEST(tiny_llama3_chat_prompt_matches_the_reference_ids) { check_model("tiny-llama3", true); }
