// `glassbox-cli compare`: sampler settings side by side on one prompt. The
// prompt is prefilled once; every lane x sample is a copy-on-write fork of its
// KV blocks and they all decode in the same engine steps (runtime/comparison.h).
// --json prints one JSON object (docs/compare.md); otherwise a table per lane.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/chat_runner.h"
#include "cli/command_registry.h"
#include "cli/model_session.h"
#include "cli/remote_compare.h"
#include "cli/sampler_options.h"
#include "runtime/comparison.h"
#include "runtime/comparison_json.h"
#include "runtime/engine.h"

namespace gb::cli {
namespace {

struct CompareArgs {
  ModelOptions model;
  std::string prompt;
  std::string chat_path;  // --chat MESSAGES.json: the prompt is a chat in the model's template
  ChatOptions chat;
  std::vector<std::string> lanes;  // NAME=SETTINGS.json (or NAME={inline json})
  int32_t num_samples = 1;
  uint64_t seed = 0;
  bool crn = false;
  int32_t max_tokens = 64;
  bool json = false;
  bool no_records = false;
  bool ignore_eos = false;
  RemoteTarget remote;  // url set: run the lanes on that server
  FormatOptions format;  // applies to every lane that names no format of its own
};

Result<ComparisonLane> parse_lane(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    return make_error("--lane " + arg + ": expected NAME=SETTINGS.json");
  std::string name = arg.substr(0, eq);
  const std::string what = arg.substr(eq + 1);
  std::string text;
  if (!what.empty() && what.front() == '{') {
    text = what;  // inline JSON
  } else {
    std::ifstream in(what, std::ios::binary);
    if (!in) return make_error("--lane " + name + ": cannot open " + what);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const std::string source = !what.empty() && what.front() == '{' ? "--lane " + name : what;
  return comparison_lane_from_json(std::move(name), text, source);
}

void print_table(const Comparison& c) {
  for (size_t i = 0; i < c.spec().lanes.size(); ++i) {
    const ComparisonLane& lane = c.spec().lanes[i];
    if (lane.kv_policy.active())
      std::printf("== lane %s (KV %s)\n", lane.name.c_str(), describe_kv_policy(lane.kv_policy).c_str());
    else
      std::printf("== lane %s\n", lane.name.c_str());
    for (int32_t j = 0; j < c.spec().num_samples; ++j) {
      const ComparisonSample& s = c.sample(static_cast<int32_t>(i), j);
      std::printf("  [%d] len %d, logprob %.3f, entropy %.3f, distinct-1 %.2f, distinct-2 %.2f, rep %.2f, %s, "
                  "diverges at %s, %.1f tok/s\n      %s\n",
                  j, s.stats.length, s.stats.mean_logprob, s.stats.mean_entropy, s.stats.distinct_1,
                  s.stats.distinct_2, s.stats.repetition_rate, s.stop_reason.c_str(),
                  s.first_divergence ? std::to_string(*s.first_divergence).c_str() : "-", s.tokens_per_s,
                  s.text.c_str());
    }
  }
  std::printf("[prompt blocks shared by every forked sample: %d; %.1f ms]\n", c.num_prompt_blocks_shared(), c.wall_ms());
}

int run_compare(const CompareArgs& a) {
  ComparisonSpec spec;
  auto format = finish_format_options(a.format);
  if (!format) return fail(format.error().message);
  for (const std::string& arg : a.lanes) {
    auto lane = parse_lane(arg);
    if (!lane) return fail(lane.error().message);
    if (lane->settings.format.kind == FormatKind::None) lane->settings.format = *format;
    spec.lanes.push_back(std::move(*lane));
  }
  spec.num_samples = a.num_samples;
  spec.seed = a.seed;
  spec.crn = a.crn;
  spec.max_tokens = a.max_tokens;
  spec.ignore_eos = a.ignore_eos;
  spec.prompt_ids = {0};  // checked before the model loads; replaced below
  if (Status st = validate_comparison(spec); !st) return fail(st.error().message);
  if (a.prompt.empty() == a.chat_path.empty()) return fail("give --prompt TEXT or --chat MESSAGES.json (one of them)");
  if (!a.remote.url.empty()) {
    if (!a.model.model_path.empty()) return fail("give --model or --remote, not both");
    if (a.ignore_eos) return fail("--ignore-eos is not available with --remote");
    if (!a.chat_path.empty()) return fail("--chat is not available with --remote (give --prompt)");
    for (const ComparisonLane& lane : spec.lanes)
      if (lane.kv_policy.active())
        return fail("lane " + lane.name + ": a KV policy runs on a local model (--model); a remote server's cache is its own");
    return run_remote_compare(a.remote, a.prompt, spec, a.json);
  }
  if (a.model.model_path.empty()) return fail("--model is required (or --remote URL)");
  std::vector<ChatMessage> messages;
  if (!a.chat_path.empty()) {
    auto m = read_chat_messages(a.chat_path);
    if (!m) return fail(m.error().message);
    messages = std::move(*m);
  }
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);
  std::string prompt_text = a.prompt, chat_format;
  if (!a.chat_path.empty()) {
    // The same rendering as generate --chat and the chat command.
    auto chat = render_chat_request(a.chat, *session, std::move(messages), SamplerSettings{});
    if (!chat) return fail(chat.error().message);
    spec.prompt_ids = std::move(chat->request.prompt_ids);
    spec.stop_token_ids = chat->request.sampling.stop_token_ids;
    spec.isolation = chat->request.isolation;
    prompt_text = chat->prompt.text;
    chat_format = chat->prompt.format;
  } else {
    spec.prompt_ids = session->tokenizer->encode(a.prompt, true);
  }

  EngineConfig config;
  config.max_seqs = static_cast<int32_t>(spec.lanes.size()) * spec.num_samples + 1;
  apply_session(*session, config);
  config.record_tokens = true;
  Engine engine(session->model, session->tokenizer, std::move(session->backend), config);
  if (Status st = engine.start(); !st) return fail(st.error().message);
  auto c = run_comparison(engine, std::move(spec));
  if (!c) return fail(c.error().message);
  if (a.json) {
    ComparisonJsonOptions options;
    options.prompt_text = prompt_text;
    options.chat_format = chat_format;
    options.token_records = !a.no_records;
    const std::string out = comparison_to_json(**c, options);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    print_table(**c);
  }
  return 0;
}

const CommandRegistrar compare_command("compare", "Compare sampler settings side by side on one prompt",
                                 [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<CompareArgs>();
  add_model_options(sub, a->model, false);
  sub.add_option("--remote", a->remote.url, "Run the lanes on an OpenAI-compatible server (http://HOST:PORT[/v1])");
  sub.add_option("--api-key", a->remote.api_key, "Bearer key for --remote");
  sub.add_option("--remote-model", a->remote.model, "Model name on the --remote server (default: its first)");
  sub.add_option("--prompt,-p", a->prompt, "Prompt text (BOS is added)");
  sub.add_option("--chat", a->chat_path,
                 "A chat as the prompt: a JSON file of messages [{\"role\",\"content\"}...], rendered by the model's "
                 "own chat template (with --system, --chat-format, --chat-template, --template-kwargs)");
  add_chat_options(sub, a->chat);
  sub.add_option("--lane", a->lanes,
                 "NAME=SETTINGS.json (the sampler preset format, optionally with \"kv_policy\"; or NAME={json}); 2 to 6")
      ->required();
  sub.add_option("--samples", a->num_samples, "Samples per lane (1 to 32)")->capture_default_str();
  sub.add_option("--seed", a->seed, "The comparison's seed")->capture_default_str();
  sub.add_flag("--crn", a->crn, "Common random numbers: every lane uses the same draw at each position");
  sub.add_option("--max-tokens,-n", a->max_tokens, "Tokens to generate per sample")->capture_default_str();
  sub.add_flag("--ignore-eos", a->ignore_eos, "Keep generating after EOS");
  sub.add_flag("--json", a->json, "Print one JSON object (docs/compare.md)");
  sub.add_flag("--no-records", a->no_records, "Leave the per-token records out of the JSON");
  add_format_options(sub, a->format);
  return [a] { return run_compare(*a); };
});

}  // namespace
}  // namespace gb::cli
