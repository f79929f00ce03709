// kv_pool_spec / kv_bytes_per_block / plan_kv against hand-worked numbers:
// layers x (K row + V row) x block_size, a row = kv_heads x head_dim values in
// its KV type (F32 4 bytes, F16 2, Q8_0 34 per 32, Q4_0 18 per 32, Q4_1 20 per 32).
#include <random>

#include "gb_test.h"
#include "backend/kv_pool_sizing.h"

namespace {
using gb::WeightType;

gb::ModelConfig llama7b_like() {
  gb::ModelConfig c;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 32;
  c.head_dim = 128;
  c.context_length = 4096;
  return c;
}

// Llama 3.1 8B's shape: 32 layers, 8 KV heads of 128, context 131072.
gb::ModelConfig llama31_8b_like() {
  gb::ModelConfig c = llama7b_like();
  c.num_kv_heads = 8;
  c.context_length = 131072;
  return c;
}

constexpr size_t kGiB = size_t{1} << 30, kMiB = size_t{1} << 20;

gb::MemoryBudget budget(size_t available, size_t weights = 0) {
  gb::MemoryBudget b;
  b.available = available;
  b.weights = weights;
  b.margin = 512 * kMiB;
  return b;
}
}  // namespace

GB_TEST(bytes_per_block_follow_the_formula) {
  // The seed doc's example: 2*32*32*128*2 = 512 KiB per token in FP16; x16 tokens = 8 MiB.
  QCOMPARE(gb::kv_bytes_per_block(llama7b_like(), 16, {WeightType::F16, WeightType::F16}), size_t{8} << 20);
  gb::ModelConfig gqa = llama7b_like();
  gqa.num_kv_heads = 8;  // GQA: a quarter of the KV
  QCOMPARE(gb::kv_bytes_per_block(gqa, 16, {WeightType::F16, WeightType::F16}), size_t{2} << 20);
  QCOMPARE(gb::kv_bytes_per_block(gqa, 16, {WeightType::F32, WeightType::F32}), size_t{4} << 20);
  // Row of 1024 values: Q8_0 32 blocks x 34 bytes, Q4_0 32 x 18, Q4_1 32 x 20; K and V apart.
  QCOMPARE(gb::kv_bytes_per_token(gqa, {WeightType::Q8_0, WeightType::Q8_0}), size_t{32} * 2 * 32 * 34);
  QCOMPARE(gb::kv_bytes_per_token(gqa, {WeightType::Q8_0, WeightType::Q4_0}), size_t{32} * 32 * (34 + 18));
  QCOMPARE(gb::kv_bytes_per_token(gqa, {WeightType::BF16, WeightType::Q4_1}), size_t{32} * (2048 + 32 * 20));
  QCOMPARE(gb::kv_bytes_per_token(gqa, {WeightType::IQ4_NL, WeightType::F32}), size_t{32} * (32 * 18 + 4096));
  QCOMPARE(gb::kv_types_name({WeightType::Q8_0, WeightType::F16}), std::string("q8_0/f16"));
}

GB_TEST(kv_types_by_name_and_what_a_model_can_hold) {
  QVERIFY(gb::parse_kv_type("Q8_0", "--kv-type-k").value() == WeightType::Q8_0);
  QVERIFY(gb::parse_kv_type("iq4_nl", "--kv-type-v").value() == WeightType::IQ4_NL);
  auto bad = gb::parse_kv_type("q3_k", "--kv-type-k");
  QVERIFY(!bad.ok());
  QVERIFY2(bad.error().message.find("--kv-type-k q3_k") != std::string::npos, bad.error().message.c_str());
  QVERIFY2(bad.error().message.find("q4_0") != std::string::npos, bad.error().message.c_str());
  gb::ModelConfig odd = llama7b_like();
  odd.num_kv_heads = 3;
  odd.head_dim = 8;  // rows of 24 values: no 32-value blocks
  QVERIFY(gb::kv_types_unsupported(odd, {WeightType::F16, WeightType::BF16}).empty());
  const std::string why = gb::kv_types_unsupported(odd, {WeightType::F16, WeightType::Q4_0});
  QVERIFY2(why.find("24") != std::string::npos && why.find("q4_0") != std::string::npos, why.c_str());
}

GB_TEST(pool_spec_from_blocks_or_bytes) {
  gb::KvPoolRequest r;
  r.num_blocks = 100;
  r.types = {WeightType::Q8_0, WeightType::Q4_0};
  auto spec = gb::kv_pool_spec(llama7b_like(), r);
  QVERIFY(spec.ok());
  QCOMPARE(spec->num_blocks, 100);
  QCOMPARE(spec->block_size, 16);
  QVERIFY(spec->k_type == WeightType::Q8_0 && spec->v_type == WeightType::Q4_0);

  r = {};
  r.types = {WeightType::F16, WeightType::F16};
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

// The 8B shape at its 131072 context: 128 KiB per token at F16 = 16 GiB of KV.
GB_TEST(plan_lowers_the_default_context_to_what_fits_and_says_so) {
  const gb::ModelConfig c = llama31_8b_like();
  gb::KvPlanRequest r;
  auto roomy = gb::plan_kv(c, r, budget(64 * kGiB, 5 * kGiB));
  QVERIFY(roomy.ok());
  QCOMPARE(roomy->context, 131072);
  QVERIFY(!roomy->context_lowered && roomy->note.empty());
  QCOMPARE(roomy->bytes_per_token, size_t{128} << 10);

  // 24 GiB less 4.2 GiB of weights and the margin: 19.3 GiB -> all of 16 GiB fits
  // at F16 but not at F32 (32 GiB).
  r.types = {WeightType::F32, WeightType::F32};
  auto f32 = gb::plan_kv(c, r, budget(24 * kGiB, 4506 * kMiB));
  QVERIFY(f32.ok());
  QVERIFY(f32->context_lowered);
  QVERIFY(f32->context < 131072 && f32->context % 256 == 0);
  QVERIFY(f32->pool_bytes <= f32->budget.for_kv());
  QVERIFY(static_cast<size_t>(f32->context + 256) * f32->bytes_per_token > f32->budget.for_kv());  // the largest
  QVERIFY2(f32->note.find("131072") != std::string::npos && f32->note.find("--ctx") != std::string::npos,
           f32->note.c_str());

  // Unknown memory (0) fits everything.
  auto unknown = gb::plan_kv(c, r, gb::MemoryBudget{});
  QVERIFY(unknown.ok());
  QCOMPARE(unknown->context, 131072);
}

GB_TEST(plan_refuses_what_does_not_fit_naming_need_and_room) {
  const gb::ModelConfig c = llama31_8b_like();
  gb::KvPlanRequest r;
  r.context = 131072;
  auto refused = gb::plan_kv(c, r, budget(8 * kGiB, 4 * kGiB));
  QVERIFY(!refused.ok());
  const std::string& m = refused.error().message;
  QVERIFY2(m.find("--ctx 131072 needs 16.0 GiB") != std::string::npos, m.c_str());
  QVERIFY2(m.find("available") != std::string::npos && m.find("q8_0") != std::string::npos, m.c_str());

  r = {};
  r.num_bytes = int64_t{20} << 30;
  auto bytes = gb::plan_kv(c, r, budget(8 * kGiB, 4 * kGiB));
  QVERIFY(!bytes.ok());
  QVERIFY2(bytes.error().message.find("--kv-bytes") != std::string::npos, bytes.error().message.c_str());

  r = {};
  r.context = 131073;  // above the model's maximum
  auto above = gb::plan_kv(c, r, gb::MemoryBudget{});
  QVERIFY(!above.ok());
  QVERIFY2(above.error().message.find("maximum") != std::string::npos, above.error().message.c_str());
  r.context = -1;
  QVERIFY(!gb::plan_kv(c, r, gb::MemoryBudget{}).ok());

  r = {};  // not even 256 tokens
  auto tiny = gb::plan_kv(c, r, budget(520 * kMiB));
  QVERIFY(!tiny.ok());
  QVERIFY2(tiny.error().message.find("256 tokens") != std::string::npos, tiny.error().message.c_str());
}

// Random configs, budgets and requests: a plan never holds more than the
// budget's room, never a context above the model's, always at least one
// context, and the default context is the model's whenever it fits.
GB_TEST(plan_properties_on_random_budgets) {
  std::mt19937 rng(7);
  const WeightType types[] = {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1};
  int lowered = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    gb::ModelConfig c;
    c.num_layers = 1 + static_cast<int32_t>(rng() % 80);
    c.num_kv_heads = 1 + static_cast<int32_t>(rng() % 16);
    c.head_dim = 32 * (1 + static_cast<int32_t>(rng() % 8));
    c.num_heads = c.num_kv_heads;
    c.context_length = 256 << (rng() % 10);
    gb::KvPlanRequest r;
    r.types = {types[rng() % 6], types[rng() % 6]};
    r.contexts = 1 + static_cast<int32_t>(rng() % 8);
    if (rng() % 3 == 0) r.context = 1 + static_cast<int32_t>(rng() % c.context_length);
    const gb::MemoryBudget b = budget((size_t{1} << 28) + (static_cast<size_t>(rng()) << (rng() % 8)));
    auto plan = gb::plan_kv(c, r, b);
    if (!plan.ok()) {
      ++refused;
      continue;
    }
    const size_t block = plan->bytes_per_token * 16;
    QVERIFY(plan->pool_bytes == static_cast<size_t>(plan->num_blocks) * block);
    QVERIFY(plan->pool_bytes <= b.for_kv());
    QVERIFY(plan->context >= 1 && plan->context <= c.context_length);
    QVERIFY(plan->num_blocks * 16 >= plan->context);
    if (r.context > 0) QCOMPARE(plan->context, r.context);
    const bool whole_fits = static_cast<size_t>((c.context_length + 15) / 16) * block <= b.for_kv();
    if (r.context == 0) QCOMPARE(plan->context_lowered, !whole_fits);
    lowered += plan->context_lowered;
  }
  QVERIFY(lowered > 50 && refused > 50);  // both paths were exercised
}

namespace {
// Gemma 3 270M's shape: 18 layers, 15 sliding over 512 tokens (pattern 6), 1
// KV head of 256, context 32768.
gb::ModelConfig gemma3_270m_like() {
  gb::ModelConfig c;
  c.num_layers = 18;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 256;
  c.context_length = 32768;
  c.sliding_window = 512;
  c.swa_pattern = 6;
  return c;
}
}  // namespace

GB_TEST(plan_gives_the_sliding_layers_a_window_group_sized_to_their_windows) {
  const gb::ModelConfig c = gemma3_270m_like();
  QVERIFY(c.has_window_group());
  QCOMPARE(c.num_sliding_layers(), 15);
  gb::KvPlanRequest r;  // f16 K and V: a layer's token is 2 x 256 x 2 = 1 KiB
  r.window_group = true;
  r.window_seqs = 4;
  r.max_chunk = 512;
  auto plan = gb::plan_kv(c, r, {});
  QVERIFY(plan.ok());
  QCOMPARE(plan->bytes_per_token, size_t{3 * 1024});
  QCOMPARE(plan->window_bytes_per_token, size_t{15 * 1024});
  QCOMPARE(plan->num_window_layers, 15);
  QCOMPARE(plan->window, 512);
  // (512 / 16 + 2) per sequence x 4, and a 512-token chunk: 512 / 16 + 1.
  QCOMPARE(plan->num_window_blocks, 34 * 4 + 33);
  QCOMPARE(plan->window_pool_bytes, size_t(34 * 4 + 33) * 16 * 15 * 1024);
  QCOMPARE(plan->num_blocks, 32768 / 16);
  QCOMPARE(plan->total_bytes(), plan->pool_bytes + plan->window_pool_bytes);

  // Off, or a model whose every layer slides (released by blocks) or none: one pool.
  r.window_group = false;
  plan = gb::plan_kv(c, r, {});
  QVERIFY(plan.ok());
  QCOMPARE(plan->num_window_blocks, 0);
  QCOMPARE(plan->bytes_per_token, size_t{18 * 1024});
  r.window_group = true;
  gb::ModelConfig mistral = c;
  mistral.swa_pattern = 1;
  QVERIFY(!mistral.has_window_group());
  QCOMPARE(gb::plan_kv(mistral, r, {})->num_window_blocks, 0);
  gb::ModelConfig global = c;
  global.sliding_window = 0;
  QCOMPARE(gb::plan_kv(global, r, {})->num_window_blocks, 0);

  // Exactly as asked, not below a window and a block.
  r.num_window_blocks = 512 / 16 + 1;
  plan = gb::plan_kv(c, r, {});
  QVERIFY(plan.ok());
  QCOMPARE(plan->num_window_blocks, 33);
  r.num_window_blocks = 32;
  plan = gb::plan_kv(c, r, {});
  QVERIFY(!plan.ok());
  QVERIFY2(plan.error().message.find("needs at least 33 blocks") != std::string::npos, plan.error().message.c_str());
  r.num_window_blocks = 0;

  // A pool of a few contexts never gets a window pool larger than it needs.
  r.context = 256;
  r.window_seqs = 64;
  plan = gb::plan_kv(c, r, {});
  QVERIFY(plan.ok());
  QCOMPARE(plan->num_blocks, 16);
  QCOMPARE(plan->num_window_blocks, 16 + 34 + 33);
  r.context = 0;

  // --kv-bytes is the whole KV: the window's share first.
  r.window_seqs = 1;
  r.num_bytes = static_cast<int64_t>(67 * 16 * 15 * 1024);  // the window pool alone
  plan = gb::plan_kv(c, r, {});
  QVERIFY(!plan.ok());
  QVERIFY2(plan.error().message.find("window alone needs") != std::string::npos, plan.error().message.c_str());
  r.num_bytes += 10 * 16 * 3 * 1024;
  plan = gb::plan_kv(c, r, {});
  QVERIFY(plan.ok());
  QCOMPARE(plan->num_blocks, 10);
  r.num_bytes = 0;

  // Short memory: the windows take at most half of the room, the global
  // layers the rest (a lowered context, said so).
  r.window_seqs = 1000;
  plan = gb::plan_kv(c, r, budget(512 * kMiB + 64 * kMiB));
  QVERIFY(plan.ok());
  QVERIFY(plan->window_pool_bytes <= 32 * kMiB);
  QVERIFY(plan->num_window_blocks >= 34 + 33);
  QVERIFY(plan->context_lowered);
  QVERIFY(plan->pool_bytes + plan->window_pool_bytes <= 64 * kMiB);
}

GB_TEST(a_device_budget_is_its_free_memory_less_work_and_margin) {
  // 80 GiB card, 10 GiB free after the weights, 1 GiB of work buffers: the
  // margin is 5% of the card (4 GiB), 5 GiB is left for KV.
  const gb::MemoryBudget b = gb::device_budget(10 * kGiB, 80 * kGiB, 1 * kGiB);
  QCOMPARE(b.available, 10 * kGiB);
  QCOMPARE(b.weights, size_t{0});
  QCOMPARE(b.margin, 4 * kGiB);
  QCOMPARE(b.for_kv(), 5 * kGiB);
  // A small card keeps at least 256 MiB; nothing free is nothing for KV.
  QCOMPARE(gb::device_budget(kGiB, 2 * kGiB, 0).margin, 256 * kMiB);
  QCOMPARE(gb::device_budget(100 * kMiB, 2 * kGiB, 0).for_kv(), size_t{0});
  // The 8B shape at f16 (128 KiB a token): 5 GiB holds 40960 tokens, so the
  // 131072-token context is lowered to that and said.
  auto plan = gb::plan_kv(llama31_8b_like(), {}, b);
  QVERIFY(plan.ok());
  QCOMPARE(plan->context, 40960);
  QVERIFY(plan->context_lowered);
}
