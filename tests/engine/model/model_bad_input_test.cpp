// One test per kind of bad model file. Each corrupt file is built here: a valid
// tiny GGUF from GgufWriter (or a llama2.c header) with chosen bytes damaged.
// Every error must name the file and the problem.
#include <cstring>
#include <limits>
#include <fstream>
#include <utility>
#include <tuple>
#include <vector>

#include "gb_test.h"
#include "model/gguf_file.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "tokenizer/tokenizer.h"
#include "model_test_files.h"

using gbtest::TinyGgufOptions;

namespace {

void expect_load_error(const std::string& path, const std::string& problem) {
  auto m = gb::load_model(path);
  QVERIFY2(!m.ok(), ("loaded although it should fail: " + path).c_str());
  const std::string& msg = m.error().message;
  QVERIFY2(msg.find(path) != std::string::npos, ("message does not name the file: " + msg).c_str());
  QVERIFY2(msg.find(problem) != std::string::npos, ("expected '" + problem + "' in: " + msg).c_str());
}

// Offset of the u64 data offset field of tensor `name` in a file we wrote.
size_t tensor_offset_field(const std::vector<uint8_t>& bytes, const std::string& name, uint32_t num_dims) {
  const size_t at = gbtest::find_bytes(bytes, name);
  GB_CHECK(at != std::string::npos);
  return at + name.size() + 4 + 8 * num_dims + 4;
}

// A llama2.c legacy header (7 int32) followed by `num_weight_bytes` zero bytes.
std::string write_llama2c(const std::string& name, std::vector<int32_t> header, size_t num_weight_bytes) {
  std::vector<uint8_t> bytes(28 + num_weight_bytes, 0);
  for (size_t i = 0; i < 7; ++i) gbtest::poke<uint32_t>(bytes, 4 * i, static_cast<uint32_t>(header[i]));
  return gbtest::write_bytes(name, bytes);
}

// Offset of ne[0] in the tensor info of 2-D tensor `name`: found by its u64
// length prefix, name and dimension count (the name alone also occurs in text).
size_t tensor_dims_field(const std::vector<uint8_t>& bytes, const std::string& name) {
  std::string key(8, '\0');
  key[0] = static_cast<char>(name.size());
  key += name;
  key += std::string("\x02\0\0\0", 4);
  const size_t at = gbtest::find_bytes(bytes, key);
  GB_CHECK(at != std::string::npos);
  return at + key.size();
}

}  // namespace

GB_TEST(tiny_gguf_baseline_loads) {
  // The corrupt files below differ from this one only in the damaged bytes.
  const std::string path = gbtest::write_tiny_gguf("baseline.gguf");
  auto m = gb::load_model(path);
  QVERIFY2(m.ok(), m.ok() ? "" : m.error().message.c_str());
  QCOMPARE(m.value()->config.vocab_size, 260);
  QCOMPARE(m.value()->config.kv_dim(), 4);
}

GB_TEST(missing_file) {
  expect_load_error(gbtest::temp_dir() + "/does-not-exist.gguf", "file not found");
}

GB_TEST(empty_file) {
  expect_load_error(gbtest::write_bytes("empty.gguf", {}), "file is empty");
}

GB_TEST(directory_is_not_a_regular_file) {
  expect_load_error(gbtest::temp_dir(), "not a regular file");
}

GB_TEST(wrong_magic) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("magic-src.gguf"));
  bytes[3] = 'X';  // "GGUX"
  expect_load_error(gbtest::write_bytes("wrong-magic.gguf", bytes), "unrecognised file format (magic 0x58554747");
}

GB_TEST(unknown_gguf_version) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("version-src.gguf"));
  gbtest::poke<uint32_t>(bytes, 4, 7);
  expect_load_error(gbtest::write_bytes("version7.gguf", bytes), "unsupported GGUF version 7");
  gbtest::poke<uint32_t>(bytes, 4, 1);
  expect_load_error(gbtest::write_bytes("version1.gguf", bytes), "unsupported GGUF version 1");
}

GB_TEST(truncated_header) {
  const auto full = gbtest::read_bytes(gbtest::write_tiny_gguf("trunc-header-src.gguf"));
  auto cut = [&](size_t n) { return std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(n)); };
  // Inside the metadata: the counts no longer fit in what is left.
  expect_load_error(gbtest::write_bytes("trunc-header.gguf", cut(200)), "truncated or corrupt header: tensor count 11");
  // The counts fit, but the token list is cut short.
  expect_load_error(gbtest::write_bytes("trunc-header1.gguf", cut(3000)), "truncated file: metadata string");
  // Inside the fixed 24-byte header.
  expect_load_error(gbtest::write_bytes("trunc-header2.gguf", cut(10)), "truncated file: tensor count");
}

GB_TEST(truncated_tensor_data) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("trunc-data-src.gguf"));
  bytes.resize(bytes.size() - 20);  // output_norm.weight (32 bytes) loses its tail
  expect_load_error(gbtest::write_bytes("trunc-data.gguf", bytes),
                    "truncated tensor data: tensor output_norm.weight needs 32 bytes");
}

GB_TEST(tensor_offset_past_the_end) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("offset-src.gguf"));
  gbtest::poke<uint64_t>(bytes, tensor_offset_field(bytes, "blk.0.ffn_up.weight", 2), uint64_t{1} << 40);
  expect_load_error(gbtest::write_bytes("offset-past-end.gguf", bytes),
                    "tensor blk.0.ffn_up.weight data offset 1099511627776 is past the end of the file");
}

GB_TEST(misaligned_tensor_data) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("align-src.gguf"));
  const size_t field = tensor_offset_field(bytes, "blk.0.attn_k.weight", 2);
  uint64_t offset = 0;
  std::memcpy(&offset, &bytes[field], 8);
  gbtest::poke<uint64_t>(bytes, field, offset + 4);
  expect_load_error(gbtest::write_bytes("misaligned.gguf", bytes), "blk.0.attn_k.weight data offset " +
                    std::to_string(offset + 4) + " is misaligned");
}

GB_TEST(overlapping_tensors) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("overlap-src.gguf"));
  gbtest::poke<uint64_t>(bytes, tensor_offset_field(bytes, "blk.0.attn_v.weight", 2), 0);  // onto token_embd
  expect_load_error(gbtest::write_bytes("overlap.gguf", bytes), "overlap");
}

GB_TEST(absurd_zero_vocab) {
  TinyGgufOptions o;
  o.overrides = {{"llama.vocab_size", gb::GgufValue::u32(0)}};
  expect_load_error(gbtest::write_tiny_gguf("zero-vocab.gguf", o), "vocab size is 0 (must be positive)");
  expect_load_error(write_llama2c("zero-vocab.bin", {8, 16, 1, 2, 2, 0, 32}, 4096), "vocab size is 0");
}

GB_TEST(absurd_huge_vocab) {
  TinyGgufOptions o;
  o.overrides = {{"llama.vocab_size", gb::GgufValue::u64(uint64_t{1} << 40)}};
  expect_load_error(gbtest::write_tiny_gguf("huge-vocab.gguf", o), "llama.vocab_size = 1099511627776 is out of range");
  // Within the limit, but the llama2.c file cannot hold that many embedding rows:
  // floats = V*D (8388608) + per layer 2*D norms (16) + wq, wo 2*D*D (128)
  //        + wk, wv 2*KV*D with KV = 2 heads * 4 (128) + 3*H*D (384) + final norm D (8)
  //        = 8389272, i.e. 33557088 bytes.
  expect_load_error(write_llama2c("huge-vocab.bin", {8, 16, 1, 2, 2, 1 << 20, 32}, 4096),
                    "vocab 1048576 need 33557088 bytes of weights but the file has 4096");
}

GB_TEST(absurd_heads_not_dividing_width) {
  TinyGgufOptions o;
  o.overrides = {{"llama.attention.head_count", gb::GgufValue::u32(3)},
                 {"llama.attention.head_count_kv", gb::GgufValue::u32(3)}};
  expect_load_error(gbtest::write_tiny_gguf("heads.gguf", o),
                    "embedding width 8 is not divisible by the head count 3");
}

GB_TEST(absurd_kv_heads_not_dividing_heads) {
  TinyGgufOptions o;
  o.overrides = {{"llama.attention.head_count", gb::GgufValue::u32(4)},
                 {"llama.attention.head_count_kv", gb::GgufValue::u32(3)}};
  expect_load_error(gbtest::write_tiny_gguf("kv-heads.gguf", o), "head count 4 is not divisible by the kv head count 3");
}

GB_TEST(absurd_zero_layers) {
  TinyGgufOptions o;
  o.overrides = {{"llama.block_count", gb::GgufValue::u32(0)}};
  expect_load_error(gbtest::write_tiny_gguf("zero-layers.gguf", o), "layer count is 0");
}

GB_TEST(tensor_shape_disagrees_with_config) {
  TinyGgufOptions o;
  o.overrides = {{"llama.feed_forward_length", gb::GgufValue::u32(12)}};
  expect_load_error(gbtest::write_tiny_gguf("shape.gguf", o),
                    "tensor blk.0.ffn_gate.weight has shape [8, 16] but the config expects [8, 12]");
}

GB_TEST(missing_required_key) {
  TinyGgufOptions o;
  o.removed_keys = {"llama.embedding_length"};
  expect_load_error(gbtest::write_tiny_gguf("missing-key.gguf", o), "missing metadata key llama.embedding_length");
}

GB_TEST(unsupported_tensor_type) {
  // Types outside the weight-type table are refused while the tensor list is
  // read (before anything is allocated), naming the tensor and the type.
  TinyGgufOptions o;
  for (const auto& [code, name] : std::vector<std::pair<uint32_t, std::string>>{
           {16, "IQ2_XXS"}, {19, "IQ1_S"}, {21, "IQ3_S"}, {34, "TQ1_0"}, {35, "TQ2_0"}, {15, "Q8_K"}}) {
    o.q_tensor_type = code;
    expect_load_error(gbtest::write_tiny_gguf("type" + std::to_string(code) + ".gguf", o),
                      "tensor blk.0.attn_q.weight has type " + name + " (ggml type " + std::to_string(code) +
                          "), which Glassbox cannot run (supported: F32, F16, BF16, Q4_0");
  }
  o.q_tensor_type = 999;
  expect_load_error(gbtest::write_tiny_gguf("q999.gguf", o),
                    "tensor blk.0.attn_q.weight has type unknown ggml type 999, which Glassbox cannot run");
}

GB_TEST(quantized_row_not_whole_blocks) {
  // The tiny model's rows have 8 values; a Q8_0 block holds 32.
  TinyGgufOptions o;
  o.q_tensor_type = 8;
  expect_load_error(gbtest::write_tiny_gguf("q8.gguf", o),
                    "tensor blk.0.attn_q.weight has rows of 8 values, not a whole number of Q8_0 blocks of 32");
  // A real Q4_K file whose first tensor claims rows of 128 values (half a super-block).
  GB_REQUIRE_SHARED(src, "testdata/quant/Q4_K.gguf");
  auto bytes = gbtest::read_bytes(src);
  gbtest::poke<uint64_t>(bytes, tensor_dims_field(bytes, "real"), 128);  // ne[0]
  expect_load_error(gbtest::write_bytes("q4k-half-row.gguf", bytes),
                    "tensor real has rows of 128 values, not a whole number of Q4_K blocks of 256");
}

GB_TEST(quantized_truncated_block_data) {
  GB_REQUIRE_SHARED(src, "testdata/quant/Q6_K.gguf");
  auto bytes = gbtest::read_bytes(src);
  bytes.resize(bytes.size() - 300);  // cut into the last tensor's blocks
  expect_load_error(gbtest::write_bytes("q6k-truncated.gguf", bytes), "truncated tensor data: tensor extreme needs");
}

GB_TEST(quantized_shape_does_not_fit_the_bytes) {
  // 32 rows instead of 16: the blocks would run into the next tensor.
  GB_REQUIRE_SHARED(src, "testdata/quant/IQ4_XS.gguf");
  auto bytes = gbtest::read_bytes(src);
  gbtest::poke<uint64_t>(bytes, tensor_dims_field(bytes, "real") + 8, 32);  // ne[1]
  expect_load_error(gbtest::write_bytes("iq4xs-rows.gguf", bytes), "tensors real and extreme overlap");
  // The last tensor growing past the end of the file instead.
  bytes = gbtest::read_bytes(src);
  gbtest::poke<uint64_t>(bytes, tensor_dims_field(bytes, "extreme") + 8, 64);
  expect_load_error(gbtest::write_bytes("iq4xs-past-end.gguf", bytes), "truncated tensor data: tensor extreme");
}

GB_TEST(unsupported_architecture) {
  TinyGgufOptions o;
  o.overrides = {{"general.architecture", gb::GgufValue::str("gpt2")}};
  expect_load_error(gbtest::write_tiny_gguf("gpt2.gguf", o), "unsupported architecture 'gpt2'");
}

GB_TEST(string_length_past_the_end) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("strlen-src.gguf"));
  // The first key's u64 length sits right after the 24-byte fixed header.
  gbtest::poke<uint64_t>(bytes, 24, uint64_t{1} << 62);
  expect_load_error(gbtest::write_bytes("strlen.gguf", bytes),
                    "metadata key length 4611686018427387904 at offset 24 runs past the end of the file");
}

GB_TEST(huge_array_count) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("array-src.gguf"));
  const std::string key = "tokenizer.ggml.tokens";
  const size_t count_field = gbtest::find_bytes(bytes, key) + key.size() + 4 + 4;
  gbtest::poke<uint64_t>(bytes, count_field, uint64_t{1} << 61);
  expect_load_error(gbtest::write_bytes("array-count.gguf", bytes),
                    "metadata key 'tokenizer.ggml.tokens': array length 2305843009213693952 runs past the end");
}

GB_TEST(huge_metadata_and_tensor_counts) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("count-src.gguf"));
  auto kv = bytes;
  gbtest::poke<uint64_t>(kv, 16, uint64_t{1} << 50);
  expect_load_error(gbtest::write_bytes("kv-count.gguf", kv), "metadata count 1125899906842624 cannot fit in the file");
  gbtest::poke<uint64_t>(bytes, 8, uint64_t{1} << 50);
  expect_load_error(gbtest::write_bytes("tensor-count.gguf", bytes), "tensor count 1125899906842624 cannot fit");
}

GB_TEST(truncated_llama2c_checkpoint) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  auto bytes = gbtest::read_bytes(path);
  bytes.resize(bytes.size() / 2);
  expect_load_error(gbtest::write_bytes("half.bin", bytes), "truncated or absurd llama2.c checkpoint");
}

GB_TEST(unsupported_llama2c_version) {
  std::vector<uint8_t> bytes(256 + 64, 0);
  gbtest::poke<uint32_t>(bytes, 0, 0x616b3432u);
  gbtest::poke<uint32_t>(bytes, 4, 2);  // int8 export
  expect_load_error(gbtest::write_bytes("v2.bin", bytes), "unsupported llama2.c checkpoint version 2");
}

GB_TEST(absurd_tensor_dimension) {
  auto bytes = gbtest::read_bytes(gbtest::write_tiny_gguf("dim-src.gguf"));
  // token_embd.weight's ne[1] (vocab rows) follows its name and n_dims.
  const size_t ne1 = gbtest::find_bytes(bytes, "token_embd.weight") + 17 + 4 + 8;
  auto huge = bytes;
  gbtest::poke<uint64_t>(huge, ne1, uint64_t{1} << 40);
  expect_load_error(gbtest::write_bytes("huge-dim.gguf", huge),
                    "tensor token_embd.weight has an absurd dimension 1099511627776");
  gbtest::poke<uint64_t>(bytes, ne1, 0);
  expect_load_error(gbtest::write_bytes("zero-dim.gguf", bytes), "tensor token_embd.weight has an absurd dimension 0");
}

// The architecture table's extra tensors are required, and shaped: a qwen3 file
// without a q/k norm, a phi3 file whose fused qkv has the wrong height.
GB_TEST(architecture_missing_or_misshapen_tensor) {
  const std::string src = gbtest::temp_dir() + "/qwen3-src.gguf";
  QVERIFY(gb::write_synthetic_arch_model(*gb::find_synthetic_arch("qwen3"), 1, src).ok());
  QVERIFY(gb::load_model(src).ok());
  auto bytes = gbtest::read_bytes(src);
  const std::string name = "blk.1.attn_k_norm.weight";
  const size_t at = gbtest::find_bytes(bytes, name);
  QVERIFY(at != std::string::npos);
  bytes[at + 11] = 'X';  // blk.1.attn_X_norm.weight
  expect_load_error(gbtest::write_bytes("qwen3-no-k-norm.gguf", bytes), "missing tensor blk.1.attn_k_norm.weight");

  const std::string phi = gbtest::temp_dir() + "/phi3-src.gguf";
  QVERIFY(gb::write_synthetic_arch_model(*gb::find_synthetic_arch("phi3"), 1, phi).ok());
  auto pb = gbtest::read_bytes(phi);
  gbtest::poke<uint64_t>(pb, tensor_dims_field(pb, "blk.0.attn_qkv.weight") + 8, 96);
  expect_load_error(gbtest::write_bytes("phi3-short-qkv.gguf", pb),
                    "tensor blk.0.attn_qkv.weight has shape [64, 96] but the config expects [64, 128]");
}

GB_TEST(architecture_bad_variation_keys) {
  const std::string src = gbtest::temp_dir() + "/gemma3-src.gguf";
  QVERIFY(gb::write_synthetic_arch_model(*gb::find_synthetic_arch("gemma3"), 1, src).ok());
  auto bytes = gbtest::read_bytes(src);
  const size_t at = gbtest::find_bytes(bytes, std::string("linear"));
  QVERIFY(at != std::string::npos);
  std::memcpy(bytes.data() + at, "yarnxx", 6);
  expect_load_error(gbtest::write_bytes("gemma3-yarn.gguf", bytes), "rope scaling type 'yarnxx' is not supported");
}

// Config values one key at a time: each is refused with its own message naming
// the key or the quantity and the value.
namespace {
void expect_override_error(const char* name, std::vector<std::pair<std::string, gb::GgufValue>> overrides,
                           const std::string& problem) {
  TinyGgufOptions o;
  o.overrides = std::move(overrides);
  expect_load_error(gbtest::write_tiny_gguf(name, o), problem);
}
const float kNan = std::numeric_limits<float>::quiet_NaN();
}  // namespace

GB_TEST(zero_context_length) {
  expect_override_error("ctx0.gguf", {{"llama.context_length", gb::GgufValue::u32(0)}}, "context length is 0 (must be positive)");
}

GB_TEST(context_length_past_the_limit) {
  expect_override_error("ctx-big.gguf", {{"llama.context_length", gb::GgufValue::u32(1u << 30)}},
                        "context length 1073741824 exceeds the limit 16777216");
}

GB_TEST(context_length_out_of_integer_range) {
  expect_override_error("ctx-huge.gguf", {{"llama.context_length", gb::GgufValue::u64(uint64_t{1} << 40)}},
                        "llama.context_length = 1099511627776 is out of range");
}

GB_TEST(negative_rms_epsilon) {
  expect_override_error("eps-neg.gguf", {{"llama.attention.layer_norm_rms_epsilon", gb::GgufValue::f32(-1.0f)}},
                        "RMSNorm epsilon -1.000000 is not in (0, 1]");
}

GB_TEST(nan_rms_epsilon) {
  expect_override_error("eps-nan.gguf", {{"llama.attention.layer_norm_rms_epsilon", gb::GgufValue::f32(kNan)}},
                        "RMSNorm epsilon nan is not in (0, 1]");
}

GB_TEST(zero_rope_frequency_base) {
  expect_override_error("rope0.gguf", {{"llama.rope.freq_base", gb::GgufValue::f32(0.0f)}},
                        "RoPE frequency base 0.000000 is not positive");
}

GB_TEST(nan_rope_frequency_base) {
  expect_override_error("rope-nan.gguf", {{"llama.rope.freq_base", gb::GgufValue::f32(kNan)}},
                        "RoPE frequency base nan is not positive");
}

GB_TEST(rope_dimension_count_past_the_head) {
  expect_override_error("rope-dim.gguf", {{"llama.rope.dimension_count", gb::GgufValue::u32(1000)}},
                        "RoPE dimension count 1000 must be even and between 2 and the head size 4");
}

GB_TEST(odd_rope_dimension_count) {
  expect_override_error("rope-odd.gguf", {{"llama.rope.dimension_count", gb::GgufValue::u32(3)}},
                        "RoPE dimension count 3 must be even");
}

GB_TEST(zero_heads) {
  expect_override_error("heads0.gguf", {{"llama.attention.head_count", gb::GgufValue::u32(0)}},
                        "head count is 0 (must be positive)");
}

GB_TEST(zero_kv_heads) {
  expect_override_error("kvheads0.gguf", {{"llama.attention.head_count_kv", gb::GgufValue::u32(0)}},
                        "kv head count is 0 (must be positive)");
}

GB_TEST(zero_ffn_width) {
  expect_override_error("ffn0.gguf", {{"llama.feed_forward_length", gb::GgufValue::u32(0)}},
                        "FFN width (hidden_dim) is 0 (must be positive)");
}

GB_TEST(layer_count_past_the_limit) {
  expect_override_error("layers-huge.gguf", {{"llama.block_count", gb::GgufValue::u32(100000)}},
                        "layer count 100000 exceeds the limit 4096");
}

GB_TEST(alignment_not_a_multiple_of_8) {
  expect_override_error("align3.gguf", {{"general.alignment", gb::GgufValue::u32(3)}},
                        "general.alignment 3 is not a positive multiple of 8");
}

GB_TEST(special_token_outside_the_vocabulary) {
  expect_override_error("bos-out.gguf", {{"tokenizer.ggml.bos_token_id", gb::GgufValue::u32(99999)}},
                        "tokenizer.ggml.bos_token_id 99999 is outside the vocabulary (260 tokens)");
}

GB_TEST(config_key_of_the_wrong_type) {
  expect_override_error("blocks-str.gguf", {{"llama.block_count", gb::GgufValue::str("two")}},
                        "llama.block_count is not an integer");
}

GB_TEST(architecture_of_the_wrong_type) {
  expect_override_error("arch-u32.gguf", {{"general.architecture", gb::GgufValue::u32(5)}},
                        "general.architecture is not a string");
}

GB_TEST(missing_architecture) {
  TinyGgufOptions o;
  o.removed_keys = {"general.architecture"};
  expect_load_error(gbtest::write_tiny_gguf("no-arch.gguf", o), "missing general.architecture (string)");
}

// Mixtures of experts: each bad count or unsupported variant one clear error,
// read before any tensor (the tiny llama file has no expert tensors at all).
GB_TEST(mixture_of_experts_bad_metadata) {
  const auto experts = [](uint32_t n) { return std::pair{std::string("llama.expert_count"), gb::GgufValue::u32(n)}; };
  const auto used = [](uint32_t n) { return std::pair{std::string("llama.expert_used_count"), gb::GgufValue::u32(n)}; };
  expect_override_error("moe-no-used.gguf", {experts(8)}, "missing metadata key llama.expert_used_count");
  expect_override_error("moe-topk.gguf", {experts(8), used(9)},
                        "llama.expert_used_count = 9 must be between 1 and expert_count (8)");
  expect_override_error("moe-top0.gguf", {experts(8), used(0)}, "llama.expert_used_count = 0 must be between 1");
  expect_override_error("moe-many.gguf", {experts(5000), used(2)}, "llama.expert_count = 5000 is out of range");
  expect_override_error("moe-shared.gguf", {experts(8), used(2), {"llama.expert_shared_count", gb::GgufValue::u32(1)}},
                        "llama.expert_shared_count = 1: shared or grouped experts are not supported");
  expect_override_error("moe-sigmoid.gguf", {experts(8), used(2), {"llama.expert_gating_func", gb::GgufValue::u32(2)}},
                        "llama.expert_gating_func = 2 is not supported");
  expect_override_error("moe-scale.gguf", {experts(8), used(2), {"llama.expert_weights_scale", gb::GgufValue::f32(2.5f)}},
                        "llama.expert_weights_scale other than 1 is not supported");
  // An architecture without experts in the table refuses them by name.
  expect_override_error("moe-qwen2.gguf", {{"general.architecture", gb::GgufValue::str("qwen2")},
                                           {"qwen2.expert_count", gb::GgufValue::u32(8)}},
                        "mixture-of-experts qwen2 models are not supported");
  // With the counts right, the missing expert tensors are named.
  expect_override_error("moe-no-tensors.gguf", {experts(4), used(2)}, "missing tensor blk.0.ffn_gate_inp.weight");
  // A dense file that writes expert_count 0 still loads.
  TinyGgufOptions dense;
  dense.overrides = {experts(0)};
  QVERIFY(gb::load_model(gbtest::write_tiny_gguf("dense-experts0.gguf", dense)).ok());
}

// A Mixtral file of the older layout, one 2-D tensor per expert, is named as such.
GB_TEST(mixture_of_experts_in_the_old_per_expert_layout) {
  TinyGgufOptions o;
  o.overrides = {{"llama.expert_count", gb::GgufValue::u32(2)}, {"llama.expert_used_count", gb::GgufValue::u32(1)}};
  gb::GgufWriter w = gbtest::tiny_gguf_writer(o);
  std::vector<std::byte> bytes(16 * 8 * sizeof(float));
  w.add_tensor("blk.0.ffn_gate.0.weight", {8, 16}, gb::WeightType::F32, bytes);
  const std::string path = gbtest::temp_dir() + "/moe-old-layout.gguf";
  QVERIFY(w.write(path).ok());
  expect_load_error(path, "the experts are stored one tensor per expert (blk.0.ffn_gate.0.weight");
}

// The converted Mixtral file (tests/data/converted) with one number changed:
// an expert count the tensors disagree with, and an expert tensor of the wrong
// shape, each named.
GB_TEST(mixture_of_experts_tensors_that_disagree) {
  const std::vector<uint8_t> good = gbtest::read_bytes(std::string(GLASSBOX_CONVERTED_REF_DIR) + "/mixtral.gguf");
  QVERIFY(!good.empty());
  QVERIFY(gb::load_model(gbtest::write_bytes("mixtral-good.gguf", good)).ok());
  // llama.expert_count: key, u32 type 4, value 4 -> 3.
  std::vector<uint8_t> bytes = good;
  const std::string key = "llama.expert_count";
  const size_t at = gbtest::find_bytes(bytes, key);
  QVERIFY(at != std::string::npos);
  QCOMPARE(bytes[at + key.size()], uint8_t{4});
  QCOMPARE(bytes[at + key.size() + 4], uint8_t{4});
  gbtest::poke<uint32_t>(bytes, at + key.size() + 4, 3);
  expect_load_error(gbtest::write_bytes("mixtral-3-experts.gguf", bytes),
                    "tensor blk.0.ffn_gate_inp.weight has shape [32, 4] but the config expects [32, 3]");
  // blk.0.ffn_gate_exps.weight's third dimension (experts) 4 -> 2.
  bytes = good;
  const std::string name = "blk.0.ffn_gate_exps.weight";
  const size_t t = gbtest::find_bytes(bytes, name);
  QVERIFY(t != std::string::npos);
  const size_t ne2 = t + name.size() + 4 + 8 * 2;  // n_dims u32, then ne[0], ne[1], ne[2] as u64
  QCOMPARE(bytes[ne2], uint8_t{4});
  gbtest::poke<uint64_t>(bytes, ne2, 2);
  expect_load_error(gbtest::write_bytes("mixtral-gate-2.gguf", bytes),
                    "tensor blk.0.ffn_gate_exps.weight has shape [32, 48, 2] but the config expects [32, 48, 4]");
}

// The converted gpt-oss file (tests/data/converted) with one byte changed: a
// missing sink or expert-bias tensor, a sink vector of the wrong length, an
// unknown RoPE scaling type and YaRN without its original context, each named.
GB_TEST(gpt_oss_bad_tensors_and_rope_scaling) {
  const std::vector<uint8_t> good = gbtest::read_bytes(std::string(GLASSBOX_CONVERTED_REF_DIR) + "/gpt-oss.gguf");
  QVERIFY(!good.empty());
  QVERIFY(gb::load_model(gbtest::write_bytes("gpt-oss-good.gguf", good)).ok());
  // Replaces the last byte of `text` (first occurrence) with `to`.
  const auto changed = [&](const std::string& text, char to) {
    std::vector<uint8_t> bytes = good;
    const size_t at = gbtest::find_bytes(bytes, text);
    if (at == std::string::npos) return std::vector<uint8_t>{};
    bytes[at + text.size() - 1] = static_cast<uint8_t>(to);
    return bytes;
  };
  const std::vector<std::tuple<std::string, char, std::string>> cases = {
      {"blk.1.attn_sinks.weight", 'X', "missing tensor blk.1.attn_sinks.weight"},
      {"blk.0.ffn_up_exps.bias", 'X', "missing tensor blk.0.ffn_up_exps.bias"},
      {"blk.2.attn_output.bias", 'X', "missing tensor blk.2.attn_output.bias"},
      {"blk.3.ffn_gate_inp.bias", 'X', "missing tensor blk.3.ffn_gate_inp.bias"},
      {"blk.0.post_attention_norm.weight", 'X', "missing tensor blk.0.post_attention_norm.weight"},
      {"yarn", 'm', "rope scaling type 'yarm' is not supported (linear and yarn are)"},
      {"gpt-oss.rope.scaling.original_context_length", 'X',
       "YaRN RoPE scaling needs gpt-oss.rope.scaling.original_context_length"},
  };
  for (const auto& [text, to, problem] : cases) {
    const std::vector<uint8_t> bytes = changed(text, to);
    QVERIFY2(!bytes.empty(), text.c_str());
    expect_load_error(gbtest::write_bytes("gpt-oss-bad.gguf", bytes), problem);
  }
  // blk.1.attn_sinks.weight's length (heads) 4 -> 3.
  std::vector<uint8_t> bytes = good;
  const std::string name = "blk.1.attn_sinks.weight";
  const size_t t = gbtest::find_bytes(bytes, name);
  QVERIFY(t != std::string::npos);
  const size_t ne0 = t + name.size() + 4;  // n_dims u32, then ne[0] as u64
  QCOMPARE(bytes[ne0], uint8_t{4});
  gbtest::poke<uint64_t>(bytes, ne0, 3);
  expect_load_error(gbtest::write_bytes("gpt-oss-sinks-3.gguf", bytes),
                    "tensor blk.1.attn_sinks.weight has shape [3] but the config expects [4]");
}

GB_TEST(no_vocabulary_and_no_tokenizer_file) {
  TinyGgufOptions o;
  o.removed_keys = {"tokenizer.ggml.tokens"};
  const std::string path = gbtest::write_tiny_gguf("no-vocab.gguf", o);
  auto m = gb::load_model(path);
  QVERIFY2(m.ok(), m.ok() ? "" : m.error().message.c_str());  // the weights are fine
  auto t = gb::load_tokenizer(**m, "");
  QVERIFY(!t.ok());
  QVERIFY2(t.error().message.find(path + ": no tokenizer found: the file has no embedded vocabulary") == 0,
           t.error().message.c_str());
  QVERIFY2(t.error().message.find("(pass a tokenizer path)") != std::string::npos, t.error().message.c_str());
}

// A SentencePiece model with a piece that starts with a NUL byte: Debian's
// libsentencepiece builds its trie from C strings, so the piece is an empty key
// and the trie builder (Darts) throws instead of returning a status. Found by
// fuzz_spm_model; the loader turns it into an error naming the file.
GB_TEST(sentencepiece_model_with_a_piece_starting_with_nul) {
  // ModelProto.pieces (field 1) = SentencePiece{piece (1), score (2, float), type (3)}.
  const auto piece = [](const std::string& text, uint8_t type) {
    std::vector<uint8_t> p = {0x0A, static_cast<uint8_t>(text.size())};
    p.insert(p.end(), text.begin(), text.end());
    p.insert(p.end(), {0x15, 0, 0, 0, 0, 0x18, type});  // score 0.0f, type
    std::vector<uint8_t> field = {0x0A, static_cast<uint8_t>(p.size())};
    field.insert(field.end(), p.begin(), p.end());
    return field;
  };
  std::vector<uint8_t> proto;
  for (const auto& [text, type] :
       std::vector<std::pair<std::string, uint8_t>>{{"<unk>", 2}, {"a", 1}, {std::string("\0b", 2), 1}, {"c", 1}}) {
    const auto f = piece(text, type);
    proto.insert(proto.end(), f.begin(), f.end());
  }
  proto.insert(proto.end(), {0x1A, 10, 0x0A, 8, 'i', 'd', 'e', 'n', 't', 'i', 't', 'y'});  // normalizer_spec.name
  const std::string path = gbtest::write_bytes("nul-piece.model", proto);
  const auto t = gb::load_tokenizer_file(path);
  QVERIFY(!t.ok());
  QVERIFY2(t.error().message.find(path + ": SentencePiece could not load it: ") == 0, t.error().message.c_str());
}
