// Reading llama2.c checkpoints (fp32) into a Model: the "legacy" export (28-byte
// header of 7 int32) and the "version 1" export (256-byte header with magic
// "ak42"). Weights are viewed in place inside the mapping; nothing is copied.
// Pure functions; any thread.
//
// Legacy:  dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
//          (vocab_size < 0: untied classifier), then token_embedding (V,D),
//          rms_att (L,D), wq (L,D,D), wk (L,KV,D), wv (L,KV,D), wo (L,D,D),
//          rms_ffn (L,D), w1 (L,H,D), w2 (L,D,H), w3 (L,H,D), rms_final (D),
//          freq_cis_real and freq_cis_imag (S*head_size/2 each, skipped),
//          then classifier (V,D) if untied.
// Version 1: u32 magic 0x616b3432, i32 version 1, the 7 int32 above, u8
//          shared_classifier, zero padding to 256 bytes; then rms_att (L,D),
//          rms_ffn (L,D), rms_final (D), token_embedding (V,D), wq, wk, wv, wo,
//          w1, w2, w3 (all layers each), then classifier (V,D) if not shared.
// KV = n_kv_heads * head_size, H = hidden_dim, S = seq_len.
#pragma once

#include <cstdint>
#include <memory>

#include "core/result.h"
#include "model/model.h"

namespace gb {

inline constexpr uint32_t kLlama2cMagic = 0x616b3432;  // "ak42" as little-endian u32
inline constexpr size_t kLlama2cLegacyHeaderBytes = 7 * sizeof(int32_t);
inline constexpr size_t kLlama2cV1HeaderBytes = 256;

// Fills model.format, config (context_length = seq_len) and weights (tensor names
// follow GGUF: "blk.0.attn_q.weight" ...). The file must hold every weight byte;
// errors name the file and the problem. `header_plausible` (optional) is set when
// the header parsed into a valid config, i.e. a failure after that point is a
// damaged llama2.c file rather than some other kind of file.
Status read_llama2c_model(const std::shared_ptr<const MappedFile>& file, Model& model,
                          bool* header_plausible = nullptr);

}  // namespace gb
