// Special tokens and end-of-generation marks of the byte-level BPE vocabularies,
// against the prompt ids of the tiny-llama3 / tiny-qwen2 references (made with the
// Hugging Face tokenizer, special tokens parsed, and checked against llama.cpp:
// ../shared/models/tiny-*/README.md).
#include "gb_test.h"
#include "tokenizer_test_support.h"

namespace {

struct Vocab {
  std::shared_ptr<const gb::Tokenizer> tokenizer;
  nlohmann::json ref;
};

Vocab open_vocab(const std::string& model, std::string& error) {
  const std::string gguf = gbtest::shared_file("models/" + model + "/" + model + "-F16.gguf");
  const std::string json = gbtest::shared_file("models/" + model + "/refs/" + model + "-F16.json");
  if (gguf.empty() || json.empty()) {
    error = "missing test data for " + model;
    return {};
  }
  return {gbtest::gguf_tokenizer(gguf, error), gbtest::read_json(json)};
}

// Every reference prompt (the chat one included) encodes to its reference ids
// with parse_special and the vocabulary's own BOS rule.
void check_reference_prompts(const std::string& model) {
  std::string error;
  const Vocab v = open_vocab(model, error);
  QVERIFY2(v.tokenizer != nullptr, error.c_str());
  for (const auto& prompt : v.ref["prompts"]) {
    const std::string text = prompt["text"].get<std::string>();
    const std::vector<gb::TokenId> want = gbtest::json_ids(prompt["ids"]);
    const auto got = v.tokenizer->encode(text, gb::EncodeOptions{.parse_special = true});
    QVERIFY2(got == want, (model + " prompt " + prompt["name"].get<std::string>() + ": got " + gbtest::ids_text(got) +
                           " want " + gbtest::ids_text(want)).c_str());
  }
}

}  // namespace

GB_TEST(llama3_reference_prompts_with_parse_special) { check_reference_prompts("tiny-llama3"); }
GB_TEST(qwen2_reference_prompts_with_parse_special) { check_reference_prompts("tiny-qwen2"); }

GB_TEST(control_strings_in_user_text_stay_plain_text) {
  std::string error;
  const Vocab v = open_vocab("tiny-qwen2", error);
  QVERIFY2(v.tokenizer != nullptr, error.c_str());
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const auto plain = v.tokenizer->encode(text, false);
  for (const gb::TokenId id : plain) QVERIFY2(!v.tokenizer->is_control(id), gbtest::ids_text(plain).c_str());
  QCOMPARE(v.tokenizer->decode(plain), text);
  const auto parsed = v.tokenizer->encode(text, gb::EncodeOptions{.add_bos = false, .parse_special = true});
  QCOMPARE(parsed.front(), gb::TokenId{151644});  // <|im_start|>
  QCOMPARE(parsed.back(), gb::TokenId{151645});   // <|im_end|>
  // Control tokens decode to nothing; the text between them is kept byte-exactly.
  QCOMPARE(v.tokenizer->decode(parsed), std::string("user\nhi"));
}

GB_TEST(bos_follows_the_vocabulary) {
  std::string error;
  const Vocab llama = open_vocab("tiny-llama3", error);
  QVERIFY2(llama.tokenizer != nullptr, error.c_str());
  const Vocab qwen = open_vocab("tiny-qwen2", error);
  QVERIFY2(qwen.tokenizer != nullptr, error.c_str());
  QCOMPARE(llama.tokenizer->encode("Hi", true).front(), gb::TokenId{128000});  // add_bos_token = true
  QCOMPARE(qwen.tokenizer->encode("Hi", true).size(), size_t{1});                // add_bos_token = false
  QCOMPARE(qwen.tokenizer->encode("Hi", gb::EncodeOptions{.add_bos = true}).front(), gb::TokenId{151643});
  // Byte-level BPE keeps a leading space: it is text, not a dummy prefix.
  QVERIFY(!llama.tokenizer->strips_dummy_prefix());
  QCOMPARE(llama.tokenizer->decode(llama.tokenizer->encode(" Hi", true)), std::string(" Hi"));
}

GB_TEST(every_end_of_turn_token_ends_generation) {
  std::string error;
  const Vocab llama = open_vocab("tiny-llama3", error);
  QVERIFY2(llama.tokenizer != nullptr, error.c_str());
  const Vocab qwen = open_vocab("tiny-qwen2", error);
  QVERIFY2(qwen.tokenizer != nullptr, error.c_str());
  for (const gb::TokenId id : {128001, 128008, 128009}) QVERIFY(llama.tokenizer->is_end_of_generation(id));
  QVERIFY(!llama.tokenizer->is_end_of_generation(128000));  // BOS
  QVERIFY(!llama.tokenizer->is_end_of_generation(791));
  for (const gb::TokenId id : {151643, 151645}) QVERIFY(qwen.tokenizer->is_end_of_generation(id));
  QVERIFY(!qwen.tokenizer->is_end_of_generation(151644));  // <|im_start|>
}
