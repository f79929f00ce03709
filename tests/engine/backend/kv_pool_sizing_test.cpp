// kv_pool_spec / kv_bytes_per_block against hand-worked numbers:
// 2 x layers x kv_heads x head_dim x bytes x block_size.
#include "gb_test.h"
#include "backend/kv_pool_sizing.h"

namespace {
gb::ModelConfig llama7b_like() {
  gb::ModelConfig c;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 32;
  c.head_dim = 128;
  return c;
}
}  // namespace

GB_TEST(bytes_per_block_follow_the_formula) {
  // The seed doc's example: 2*32*32*128*2 = 512 KiB per token in FP16; x16 tokens = 8 MiB.
  QCOMPARE(gb::kv_bytes_per_block(llama7b_like(), 16, 2), size_t{8} << 20);
  gb::ModelConfig gqa = llama7b_like();
  gqa.num_kv_heads = 8;  // GQA: a quarter of the KV
  QCOMPARE(gb::kv_bytes_per_block(gqa, 16, 2), size_t{2} << 20);
  QCOMPARE(gb::kv_bytes_per_block(gqa, 16, 4), size_t{4} << 20);
}

GB_TEST(pool_spec_from_blocks_or_bytes) {
  gb::KvPoolRequest r;
  r.num_blocks = 100;
  auto spec = gb::kv_pool_spec(llama7b_like(), r);
  QVERIFY(spec.ok());
  QCOMPARE(spec->num_blocks, 100);
  QCOMPARE(spec->block_size, 16);

  r = {};
  r.bytes_per_element = 2;
  r.num_bytes = (int64_t{8} << 20) * 10 + 12345;  // 10 blocks and change: rounds down
  spec = gb::kv_pool_spec(llama7b_like(), r);
  QVERIFY(spec.ok());
  QCOMPARE(spec->num_blocks, 10);
}

GB_TEST(pool_spec_rejects_bad_options_with_a_message) {
  gb::KvPoolRequest r;
  QVERIFY(!gb::kv_pool_spec(llama7b_like(), r).ok());  // neither
  r.num_blocks = 4;
  r.num_bytes = 1 << 30;
  QVERIFY(!gb::kv_pool_spec(llama7b_like(), r).ok());  // both
  r = {};
  r.num_bytes = 1000;
  auto small = gb::kv_pool_spec(llama7b_like(), r);
  QVERIFY(!small.ok());
  QVERIFY(small.error().message.find("--kv-bytes 1000") != std::string::npos);
  r = {};
  r.num_blocks = 0;
  auto zero = gb::kv_pool_spec(llama7b_like(), r);
  QVERIFY(!zero.ok());
  QVERIFY(zero.error().message.find("--kv-blocks") != std::string::npos);
}

// kv_pool_blocks, the engine's one pool policy, rule by rule (context 1000 at
// block 16 is 63 blocks per context).
GB_TEST(pool_blocks_follow_the_first_rule_that_applies) {
  gb::KvPoolPolicy p;
  p.max_context = 1000;
  p.block_size = 16;
  p.max_seqs = 32;
  auto serving = gb::kv_pool_blocks(llama7b_like(), p);  // 32 seqs at a quarter context each
  QVERIFY(serving.ok());
  QCOMPARE(*serving, 63 * 32 / 4);
  p.max_seqs = 2;  // never less than one full context
  QCOMPARE(gb::kv_pool_blocks(llama7b_like(), p).value(), 63);
  p.full_contexts = 4;
  QCOMPARE(gb::kv_pool_blocks(llama7b_like(), p).value(), 4 * 63);
  p.max_context = 20;  // two blocks per context, but at least 16
  QCOMPARE(gb::kv_pool_blocks(llama7b_like(), p).value(), 16);
  p.num_bytes = (size_t{16} << 20) * 3 + 5;  // FP32 K/V: 16 MiB a block -> 3 blocks
  QCOMPARE(gb::kv_pool_blocks(llama7b_like(), p).value(), 3);
  p.num_blocks = 7;
  QCOMPARE(gb::kv_pool_blocks(llama7b_like(), p).value(), 7);
  p.num_blocks = 0;
  p.num_bytes = 1000;  // less than one block: kv_pool_spec's message
  auto small = gb::kv_pool_blocks(llama7b_like(), p);
  QVERIFY(!small.ok());
  QVERIFY(small.error().message.find("--kv-bytes 1000") != std::string::npos);
}
