// make_trace_header (see make_trace_header.h).
#include "runtime/make_trace_header.h"

#include "core/sha256.h"
#include "model/model.h"
#include "sampling/sampler_settings.h"
#include "sampling/sampler_settings_json.h"
#include "trace/trace_event.h"
#include "tokenizer/tokenizer.h"

namespace gb {

Result<TraceHeader> make_trace_header(const Model& model, const Tokenizer* tokenizer, const std::string& tokenizer_path,
                                      const SamplerSettings& settings, bool hash_model) {
  TraceHeader h;
  h.schema_version = kTraceSchemaVersion;
  h.engine_version = GLASSBOX_VERSION;
  h.created = utc_timestamp_now();
  h.model.path = model.path;
  h.model.name = model.name;
  h.model.format = std::string(model_format_name(model.format));
  h.model.architecture = model.config.architecture;
  h.model.config = model.config;
  if (hash_model && !model.path.empty()) {
    auto digest = sha256_file_hex(model.path);
    if (!digest.ok()) return digest.error();
    h.model.sha256 = digest.value();
  }
  if (tokenizer != nullptr) {
    h.tokenizer.kind = std::string(tokenizer->kind());
    h.tokenizer.path = tokenizer_path;
    h.tokenizer.vocab_size = tokenizer->vocab_size();
    h.tokenizer.bos_id = tokenizer->bos_id();
    h.tokenizer.eos_id = tokenizer->eos_id();
  }
  h.sampler_settings = sampler_settings_to_json(settings);
  h.seed = settings.seed;
  return h;
}

}  // namespace gb
