// `glassbox-cli inspect`: inside the model at one position of a prompt --
// attention per layer and head, the logit lens and per-layer signals
// (runtime/inside.h, docs/inside.md). --json prints the report's JSON.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/command_registry.h"
#include "cli/model_session.h"
#include "runtime/engine.h"
#include "runtime/inside.h"

namespace gb::cli {
namespace {

struct InspectArgs {
  ModelOptions model;
  std::string prompt;
  std::string prompt_file;
  int32_t position = -1;  // -1: the last token; negative counts from the end
  std::string layers;
  int32_t top_k = 5;
  bool no_attention = false;
  bool residuals = false;
  bool json = false;
  int32_t repeat = 1;  // runs of the same inspection (the second reuses the cache: timing)
};

std::string quoted(const Tokenizer& tok, TokenId id) { return "'" + tok.token_bytes(id) + "'"; }

void print_text(const InsideReport& r, const Tokenizer& tok) {
  std::printf("position %d %s of %zu tokens, target %s (%s); kv %s/%s, %d reused, %d recomputed\n", r.position,
              quoted(tok, r.context.back()).c_str(), r.context.size(), quoted(tok, r.target).c_str(),
              r.target_is_next ? "next token" : "model's argmax", r.k_type.c_str(), r.v_type.c_str(), r.reused_tokens,
              r.recomputed_tokens);
  std::printf("final:");
  for (const InsideTop& t : r.final_top) std::printf(" %s %.3f", quoted(tok, t.id).c_str(), t.prob);
  std::printf("\n");
  if (!r.lens_error.empty()) std::printf("lens: %s\n", r.lens_error.c_str());
  for (const InsideLayer& l : r.layers) {
    std::printf("layer %2d%s resid %8.3f attn %8.3f mlp %8.3f cos %6.3f", l.layer,
                l.window > 0 ? ("(w" + std::to_string(l.window) + ")").c_str() : "     ", l.residual_norm,
                l.attention_norm, l.mlp_norm, l.cosine_to_previous);
    if (!l.lens_top.empty()) {
      std::printf(" | target rank %6d p %.3f | lens", l.target_rank, l.target_prob);
      for (size_t i = 0; i < std::min<size_t>(3, l.lens_top.size()); ++i)
        std::printf(" %s %.3f", quoted(tok, l.lens_top[i].id).c_str(), l.lens_top[i].prob);
    }
    // Per head: the most attended position.
    if (!l.attention.empty()) {
      std::printf(" | heads");
      for (const std::vector<float>& row : l.attention) {
        const auto best = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
        const int32_t p = l.first_position + best;
        std::printf(" %d:%s %.2f", p, quoted(tok, r.context[static_cast<size_t>(p)]).c_str(), row[static_cast<size_t>(best)]);
      }
    }
    std::printf("\n");
  }
  std::printf("time: prefill %.1f ms, capture %.1f ms, lens %.1f ms, total %.1f ms\n", r.prefill_ms, r.capture_ms,
              r.lens_ms, r.total_ms);
}

int run_inspect(const InspectArgs& a) {
  std::string text = a.prompt;
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) return fail("--prompt-file: cannot open " + a.prompt_file);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  if (text.empty()) return fail("give --prompt TEXT or --prompt-file FILE");
  InsideOptions options;
  if (Status st = parse_inside_layers(a.layers, options); !st) return fail("--layers: " + st.error().message);
  options.top_k = a.top_k;
  options.attention = !a.no_attention;
  options.residuals = a.residuals;
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);
  const std::vector<TokenId> ids = session->tokenizer->encode(text, true);
  if (ids.empty()) return fail("the prompt has no tokens");
  const auto n = static_cast<int32_t>(ids.size());
  const int32_t position = a.position < 0 ? n + a.position : a.position;
  if (position < 0 || position >= n)
    return fail("--position " + std::to_string(a.position) + ": the prompt has " + std::to_string(n) + " tokens");
  EngineConfig config;
  config.max_seqs = 1;
  apply_session(*session, config);
  auto tokenizer = session->tokenizer;
  Engine engine(session->model, session->tokenizer, std::move(session->backend), config);
  if (Status st = engine.start(); !st) return fail(st.error().message);
  Result<InsideReport> report = make_error("--repeat must be at least 1");
  for (int32_t i = 0; i < a.repeat; ++i) {
    report = engine.inspect(ids, position, options);
    if (!report) return fail(report.error().message);
    (void)engine.drain_events();
  }
  if (!report) return fail(report.error().message);
  if (a.json) {
    const std::string line = inside_to_json(*report, *tokenizer);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    print_text(*report, *tokenizer);
  }
  return 0;
}

const CommandRegistrar inspect_command(
    "inspect", "Inside the model at one position: attention per layer and head, the logit lens, per-layer signals",
    [](CLI::App& sub) -> CommandRunner {
      auto a = std::make_shared<InspectArgs>();
      add_model_options(sub, a->model);
      sub.add_option("--prompt", a->prompt, "Text to run (BOS added as the model wants)");
      sub.add_option("--prompt-file", a->prompt_file, "File whose text to run");
      sub.add_option("--position", a->position, "Token position to inspect (0-based; negative counts from the end)")
          ->capture_default_str();
      sub.add_option("--layers", a->layers, "Layers to report: A-B or A (0-based; default all)");
      sub.add_option("--top-k", a->top_k, "Lens and final top-k (1-100)")->capture_default_str();
      sub.add_flag("--no-attention", a->no_attention, "Leave out the attention rows");
      sub.add_flag("--residuals", a->residuals, "Include the residual vectors entering and leaving each layer (JSON)");
      sub.add_option("--repeat", a->repeat, "Inspect this many times (later runs reuse the cached prefix; timing)")
          ->capture_default_str();
      sub.add_flag("--json", a->json, "Print the report as JSON (docs/inside.md)");
      return [a] { return run_inspect(*a); };
    });

}  // namespace
}  // namespace gb::cli
