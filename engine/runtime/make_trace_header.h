// make_trace_header: the TraceHeader of a run from the loaded model and tokenizer
// (engine version, now, model facts and optionally the file's SHA-256, tokenizer
// facts, sampler settings and seed). It lives in runtime/, above model/ and
// tokenizer/, so trace/ itself only knows the header's plain values.
//
// Threads: any thread (hash_model reads the model file).
#pragma once

#include <string>

#include "core/result.h"
#include "trace/trace_header.h"

namespace gb {

struct Model;
class Tokenizer;
struct SamplerSettings;

// Fills a header for a run: engine version, now, model facts, tokenizer facts,
// settings and their seed. hash_model reads the whole model file for its SHA-256
// (about a second per GB); without it sha256 stays "".
Result<TraceHeader> make_trace_header(const Model& model, const Tokenizer* tokenizer, const std::string& tokenizer_path,
                                      const SamplerSettings& settings, bool hash_model);

}  // namespace gb
