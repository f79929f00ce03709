// `glassbox-cli generate`: one request through the Engine. Streams text to
// stdout, or with --json one JSON object per line: the prompt ids, each token
// with its sampler record, then a summary line (docs/trace-format.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/chat_runner.h"
#include "cli/command_registry.h"
#include "cli/kv_policy_options.h"
#include "cli/model_session.h"
#include "cli/remote_generate.h"
#include "cli/sampler_options.h"
#include "cli/token_json.h"
#include "runtime/engine.h"
#include "runtime/make_trace_header.h"
#include "speculative/speculative_decoder.h"
#include "speculative/speculative_stats.h"
#include "trace/chrome_trace.h"
#include "trace/trace_header.h"
#include "trace/trace_jsonl.h"
#include "trace/background_trace_writer.h"

namespace gb::cli {
namespace {

struct GenerateArgs {
  ModelOptions model;
  SamplerOptions sampler;
  KvPolicyOptions kv_policy;
  bool kv_shadow = false;
  std::string prompt;
  int32_t max_tokens = 256;
  bool json = false;
  bool ignore_eos = false;
  bool no_echo = false;
  bool parse_special = false;
  std::string trace_path;
  std::string chrome_trace_path;
  std::string speculative;  // ngram[:n=N,k=K] | draft:PATH[:k=K] | self:LAYERS[:k=K]
  bool chat = false;        // the prompt is one user turn in the model's chat template
  ChatOptions chat_options;
  std::string remote;       // URL of an OpenAI-compatible server used instead of --model
  std::string api_key;      // for --remote
  std::string remote_model; // for --remote; "" -> the server's first model
};

void print_text(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

Result<TraceHeader> trace_header(const GenerateArgs& a, const ModelSession& session, const Engine& engine,
                                 const SamplerSettings& settings) {
  auto header = make_trace_header(*session.model, session.tokenizer.get(), a.model.tokenizer_path, settings, true);
  if (!header) return header.error();
  header->kv_block_size = engine.block_size();
  header->kv_num_blocks = engine.num_pool_blocks();
  header->kv_types = kv_types_name(engine.kv_plan().types);
  return header;
}

// The prompt as a request: a single user turn (after --system) in the model's
// chat template with --chat, else the text as it is.
Result<GenerationRequest> make_request(const GenerateArgs& a, const ModelSession& session,
                                       const SamplerSettings& settings) {
  GenerationRequest request;
  if (a.chat) {
    auto chat = render_chat_request(a.chat_options, session, {{"user", a.prompt, {}}}, settings);
    if (!chat) return chat.error();
    request = std::move(chat->request);
  } else {
    request.prompt_ids = session.tokenizer->encode(a.prompt, EncodeOptions{.parse_special = a.parse_special});
    request.sampling = settings;
  }
  request.ignore_eos = a.ignore_eos;
  return request;
}

// --speculative: the drafter for the request and the scratch blocks it drafts into.
Status apply_speculative(const std::string& spec_text, GenerationRequest& request, EngineConfig& config) {
  if (spec_text.empty()) return {};
  auto spec = parse_speculative_spec(spec_text);
  if (!spec) return spec.error();
  request.speculative = *spec;
  config.num_scratch_blocks = self_draft_scratch_blocks(spec->k_max, config.block_size);
  return {};
}

// --trace is written as events happen (a crash loses at most the last second);
// a Chrome trace (--chrome-trace) is one JSON document, built at the end.
class TraceOutputs {
 public:
  Status open(const GenerateArgs& a, const ModelSession& session, const Engine& engine, const SamplerSettings& sampling) {
    chrome_path_ = a.chrome_trace_path;
    if (a.trace_path.empty() && a.chrome_trace_path.empty()) return {};
    auto h = trace_header(a, session, engine, sampling);
    if (!h) return h.error();
    header_ = std::move(*h);
    if (a.trace_path.empty()) return {};
    auto w = BackgroundTraceWriter::open(a.trace_path, *header_);
    if (!w) return w.error();
    writer_ = std::move(*w);
    return {};
  }

  // The events of one step; the --trace writer takes them (its own thread
  // formats and writes them).
  void record(std::vector<TraceEvent> events) {
    if (!chrome_path_.empty()) chrome_events_.insert(chrome_events_.end(), events.begin(), events.end());
    if (writer_ && status_) status_ = writer_->append(std::move(events));
  }

  // Closes the --trace file and writes the Chrome trace; the first failure.
  Status close() {
    if (writer_ && status_) status_ = writer_->close();
    if (!status_) return status_;
    if (!chrome_path_.empty()) return write_chrome_trace(chrome_path_, *header_, chrome_events_);
    return {};
  }

 private:
  std::string chrome_path_;
  std::optional<TraceHeader> header_;
  std::unique_ptr<BackgroundTraceWriter> writer_;
  Status status_;  // the first failed append stops the writing
  std::vector<TraceEvent> chrome_events_;
};

// --max-tokens 0: nothing to generate, an empty completion.
void print_empty_completion(const GenerateArgs& a, const GenerationRequest& request) {
  if (a.json) print_json_line({{"done", true}, {"reason", "max_tokens"}, {"num_prompt_tokens", request.prompt_ids.size()},
                          {"num_generated", 0}, {"ttft_ms", 0.0}, {"tpot_ms", 0.0}, {"tokens_per_s", 0.0}, {"text", ""}});
  else std::fputc('\n', stdout);
}

void print_summary(const GenerateArgs& a, const RequestFinishedEvent& finished,
                   const std::optional<SpeculativeStats>& spec_stats) {
  const double tokens_per_s = finished.tpot_ms > 0 ? 1000.0 / finished.tpot_ms : 0.0;
  if (a.json) {
    nlohmann::json done = {{"done", true},
                {"reason", finished.reason},
                {"num_prompt_tokens", finished.num_prompt_tokens},
                {"num_generated", finished.num_generated},
                {"ttft_ms", finished.ttft_ms},
                {"tpot_ms", finished.tpot_ms},
                {"tokens_per_s", tokens_per_s},
                {"e2e_ms", finished.e2e_ms},
                {"text", finished.text}};
    if (spec_stats) done["speculative"] = nlohmann::json::parse(speculative_stats_json(*spec_stats));
    print_json_line(done);
    return;
  }
  // The text ends its line and reaches the terminal before the statistics
  // (stderr is unbuffered: without the flush they would land mid-line).
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "[%d tokens, %s; ttft %.1f ms, %.1f tok/s]\n", finished.num_generated,
               finished.reason.c_str(), finished.ttft_ms, tokens_per_s);
  if (spec_stats) std::fprintf(stderr, "[speculative %s]\n", speculative_stats_json(*spec_stats).c_str());
}

// --kv-shadow: the per-token cost of the policy against its full-cache shadow.
void print_shadow_summary(const GenerateArgs& a, const std::vector<KvShadowEvent>& shadow) {
  double sum = 0.0, max = 0.0;
  int agree = 0;
  for (const KvShadowEvent& k : shadow) {
    sum += k.kl;
    max = std::max(max, k.kl);
    agree += k.top1_agree ? 1 : 0;
  }
  const double n = static_cast<double>(std::max<size_t>(1, shadow.size()));
  if (a.json) {
    nlohmann::json kl = nlohmann::json::array();
    for (const KvShadowEvent& k : shadow) kl.push_back(k.kl);
    print_json_line({{"kv_shadow", {{"tokens", shadow.size()}, {"kl_mean", sum / n}, {"kl_max", max},
                                    {"top1_agreement", agree / n}, {"kl", kl}}}});
    return;
  }
  std::fprintf(stderr, "[kv shadow: %zu tokens, KL mean %.5f max %.5f, top-1 agreement %.1f%%]\n", shadow.size(),
               sum / n, max, 100.0 * agree / n);
}

int run_generate(GenerateArgs& a) {
  auto settings = finish_sampler_options(a.sampler);
  if (!settings) return fail(settings.error().message);
  settings->max_tokens = a.max_tokens;
  if (!a.remote.empty()) {
    if (!a.model.model_path.empty()) return fail("give --model or --remote, not both");
    return run_remote_generate({a.remote, a.api_key, a.remote_model, a.prompt, a.max_tokens, a.json, a.no_echo}, *settings);
  }
  if (a.model.model_path.empty()) return fail("--model is required (or --remote URL)");
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);

  auto made = make_request(a, *session, *settings);
  if (!made) return fail(made.error().message);
  GenerationRequest request = std::move(*made);
  auto policy = finish_kv_policy_options(a.kv_policy);
  if (!policy) return fail(policy.error().message);
  request.kv_policy = *policy;
  request.kv_shadow = a.kv_shadow;
  if (a.kv_shadow && !policy->active()) return fail("--kv-shadow needs an evicting --kv-policy");
  EngineConfig config;
  if (Status st = apply_speculative(a.speculative, request, config); !st) return fail(st.error().message);
  config.max_seqs = a.kv_shadow ? 2 : 1;  // the shadow runs beside the request
  apply_session(*session, config);
  config.record_tokens = true;
  Engine engine(session->model, session->tokenizer, std::move(session->backend), config);
  if (Status st = engine.start(); !st) return fail(st.error().message);
  TraceOutputs traces;
  if (Status st = traces.open(a, *session, engine, request.sampling); !st) return fail(st.error().message);

  std::optional<RequestFinishedEvent> finished;
  std::string error;
  std::optional<RequestId> main_id;
  std::vector<KvShadowEvent> shadow;  // --kv-shadow: what eviction cost per token
  const auto on_event = [&](const TraceEvent& e) {
    if (const auto* k = std::get_if<KvShadowEvent>(&e.body)) shadow.push_back(*k);
    if (const auto* t = std::get_if<TokenSampledEvent>(&e.body); t && main_id && t->request != *main_id) return;
    if (const auto* f = std::get_if<RequestFinishedEvent>(&e.body); f && main_id && f->request != *main_id) return;
    if (const auto* t = std::get_if<TokenSampledEvent>(&e.body)) {
      if (a.json) print_json_line(token_json(*t));
      else print_text(t->text);
    } else if (const auto* f = std::get_if<RequestFinishedEvent>(&e.body)) {
      finished = *f;
    } else if (const auto* err = std::get_if<ErrorEvent>(&e.body)) {
      error = err->message;
    }
  };

  // The prompt is echoed once the engine has taken the request, so a refusal
  // (a KV budget the pool cannot hold...) is the only thing printed.
  const auto echo = [&] {
    if (a.json) print_json_line({{"prompt", a.prompt}, {"prompt_ids", request.prompt_ids}});
    else if (!a.no_echo && !a.chat) print_text(session->tokenizer->decode(request.prompt_ids));
  };
  if (a.max_tokens == 0) {
    echo();
    print_empty_completion(a, request);
    return 0;
  }
  auto id = engine.submit(request);
  if (!id) return fail(id.error().message);
  echo();
  main_id = *id;
  while (engine.has_work()) {
    auto stepped = engine.step();
    if (!stepped) return fail(stepped.error().message);
    std::vector<TraceEvent> events = engine.drain_events();
    for (const TraceEvent& e : events) on_event(e);
    traces.record(std::move(events));
  }
  if (!error.empty()) return fail(error);
  if (!finished) return fail("the request ended without a result");
  print_summary(a, *finished, engine.speculative_stats(*id));
  if (a.kv_shadow) print_shadow_summary(a, shadow);
  if (Status st = traces.close(); !st) return fail(st.error().message);
  return 0;
}

const CommandRegistrar generate_command("generate", "Generate text from a prompt", [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<GenerateArgs>();
  add_model_options(sub, a->model, false);
  sub.add_option("--remote", a->remote, "Generate on an OpenAI-compatible server (http://HOST:PORT[/v1]) instead of --model");
  sub.add_option("--api-key", a->api_key, "Bearer key for --remote");
  sub.add_option("--remote-model", a->remote_model, "Model name on the --remote server (default: its first)");
  sub.add_option("--prompt,-p", a->prompt, "Prompt text (BOS is added)");
  sub.add_option("--max-tokens,-n", a->max_tokens, "Maximum tokens to generate")->check(CLI::NonNegativeNumber)->capture_default_str();
  add_sampler_options(sub, a->sampler);
  add_kv_policy_options(sub, a->kv_policy);
  sub.add_flag("--kv-shadow", a->kv_shadow,
               "Also run the request with the full cache (forced to the same tokens) and report the KL per token");
  sub.add_flag("--ignore-eos", a->ignore_eos, "Keep generating after EOS");
  sub.add_flag("--chat", a->chat, "Send the prompt as one user turn in the model's chat template (printed: the reply only)");
  add_chat_options(sub, a->chat_options);
  sub.add_flag("--json", a->json, "One JSON object per line: prompt ids, each token with its record, a summary");
  sub.add_flag("--no-echo", a->no_echo, "Do not print the prompt before the generated text");
  sub.add_flag("--parse-special", a->parse_special,
               "Recognise control-token strings in the prompt (<|im_start|>, <|eot_id|>) as their ids");
  sub.add_option("--trace", a->trace_path, "Write the session trace as JSON Lines");
  sub.add_option("--chrome-trace", a->chrome_trace_path, "Write a Chrome / Perfetto trace (JSON)");
  sub.add_option("--speculative", a->speculative,
                 "Speculative decoding: ngram[:n=N,k=K] | draft:PATH[:k=K] | self:LAYERS[:k=K]; "
                 "options also k_min, k_max, fallback=timing|accept|off");
  return [a] { return run_generate(*a); };
});

}  // namespace
}  // namespace gb::cli
