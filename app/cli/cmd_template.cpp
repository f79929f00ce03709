// `glassbox-cli template`: the chat-template renderer on its own.
//   template render TEMPLATE.jinja --context CONTEXT.json [--now ISO-TIME]
//       prints the exact rendering (no newline added) and exits 0; on an error
//       exits 1 with the message on stderr: a raise_exception message verbatim,
//       anything else as "FILE: line L, column C: message".
//   template show --model M
//       prints the model's own template (GGUF tokenizer.chat_template) exactly.
// docs/chat-templates.md describes the context file and the supported subset.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/command_registry.h"
#include "template/chat_template.h"
#include "template/model_chat_template.h"

namespace gb::cli {
namespace {

struct TemplateArgs {
  std::string template_path;
  std::string context_path;
  std::string now;
  std::string model_path;
};

Result<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void print_exact(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

int run_render(const TemplateArgs& a) {
  auto source = read_whole_file(a.template_path);
  if (!source) return fail(source.error().message);
  auto context_text = read_whole_file(a.context_path);
  if (!context_text) return fail(context_text.error().message);
  auto context = render_context_from_json(*context_text);
  if (!context) return fail(a.context_path + ": " + context.error().message);
  TemplateRenderOptions options;
  if (!a.now.empty()) {
    auto now = parse_iso_time(a.now);
    if (!now) return fail("--now: " + now.error().message);
    options.now = *now;
  }
  const ChatTemplate tpl = ChatTemplate::compile(std::move(*source));
  const TemplateOutcome out = tpl.render(*context, options);
  if (!out.ok()) {
    if (out.failure->kind == jinja::ErrorKind::Raised) {
      std::fprintf(stderr, "%s\n", out.failure->message.c_str());
      return 1;
    }
    return fail(a.template_path + ": " + out.failure->describe());
  }
  print_exact(out.text);
  return 0;
}

int run_show(const TemplateArgs& a) {
  auto text = read_model_chat_template(a.model_path);
  if (!text) return fail(text.error().message);
  if (text->empty()) return fail(a.model_path + ": the file carries no chat template (tokenizer.chat_template)");
  print_exact(*text);
  return 0;
}

const CommandRegistrar template_command("template", "Render a chat template, or show a model's own", [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<TemplateArgs>();
  sub.require_subcommand(1);
  CLI::App* render = sub.add_subcommand("render", "Render TEMPLATE.jinja with the variables of CONTEXT.json");
  render->add_option("template", a->template_path, "Jinja chat template file")->required();
  render->add_option("--context,-c", a->context_path, "JSON object of render variables (messages, tools, ...)")->required();
  render->add_option("--now", a->now, "Fixed clock for strftime_now(), e.g. 2025-03-14T09:26:53");
  CLI::App* show = sub.add_subcommand("show", "Print the model's own chat template (tokenizer.chat_template)");
  show->add_option("--model,-m", a->model_path, "Model file (GGUF)")->required();
  return [a, render] { return render->parsed() ? run_render(*a) : run_show(*a); };
});

}  // namespace
}  // namespace gb::cli
