// read_gguf_vocabulary on shared files. Expected values come from the files'
// documentation (models/README.md: Llama 2 SentencePiece vocabulary, BOS 1,
// EOS 2, UNK 0) and from the SentencePiece conventions (<0x0A> is a byte token).
#include "gb_test.h"
#include "model/gguf_vocabulary.h"

GB_TEST(llama_spm_vocab_file_reads_without_tensors) {
  GB_REQUIRE_SHARED(path, "testdata/tokenizer/ggml-vocab-llama-spm.gguf");
  auto vocab = gb::read_gguf_vocabulary(path);
  QVERIFY2(vocab.ok(), vocab.ok() ? "" : vocab.error().message.c_str());
  QCOMPARE(vocab->model, std::string("llama"));
  QCOMPARE(vocab->tokens.size(), size_t{32000});
  QCOMPARE(vocab->scores.size(), size_t{32000});
  QCOMPARE(vocab->token_types.size(), size_t{32000});
  QCOMPARE(vocab->tokens[0], std::string("<unk>"));
  QCOMPARE(vocab->tokens[1], std::string("<s>"));
  QCOMPARE(vocab->tokens[2], std::string("</s>"));
  QCOMPARE(vocab->tokens[3 + 0x0A], std::string("<0x0A>"));
  QCOMPARE(vocab->token_types[3 + 0x0A], 6);  // byte token
  QCOMPARE(vocab->token_types[1], 3);          // control
  QCOMPARE(vocab->bos_id, 1);
  QCOMPARE(vocab->eos_id, 2);
  QCOMPARE(vocab->unk_id, 0);
  QVERIFY(vocab->add_space_prefix);
}

GB_TEST(stories260k_gguf_vocab_matches_tok512_layout) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
  auto vocab = gb::read_gguf_vocabulary(path);
  QVERIFY2(vocab.ok(), vocab.ok() ? "" : vocab.error().message.c_str());
  QCOMPARE(vocab->tokens.size(), size_t{512});
  QCOMPARE(vocab->tokens[3], std::string("<0x00>"));
  QCOMPARE(vocab->tokens[258], std::string("<0xFF>"));
  QCOMPARE(vocab->bos_id, 1);
  QCOMPARE(vocab->eos_id, 2);
}

GB_TEST(llama2c_file_is_not_a_gguf_vocabulary) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  auto vocab = gb::read_gguf_vocabulary(path);
  QVERIFY(!vocab.ok());
  QVERIFY(vocab.error().message.find(path) != std::string::npos);
  QVERIFY(vocab.error().message.find("not a GGUF file") != std::string::npos);
}
