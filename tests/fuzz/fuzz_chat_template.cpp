// Chat templates (engine/template): the input is a model's tokenizer.chat_template.
// ChatFormatter::create compiles it as model loading does (falling back to a
// built-in format on a syntax error) and render() formats a fixed conversation
// the way chat, serve and the workbench do, inside the sandbox's limits.
// Inputs with a NUL byte are split: template before it, render context JSON
// (as `glassbox-cli template render` reads it) after it.
#include <ctime>
#include <string>

#include "fuzz_support.h"
#include "template/chat_prompt.h"
#include "template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source = input.substr(0, nul);
  std::tm now{};
  now.tm_year = 125;
  now.tm_mday = 1;
  if (nul != std::string::npos) {
    auto context = gb::render_context_from_json(std::string_view(input).substr(nul + 1));
    if (context.ok()) {
      const gb::ChatTemplate t = gb::ChatTemplate::compile(source);
      if (t.ok()) (void)t.render(context.value(), gb::TemplateRenderOptions{.now = now});
    }
    return 0;
  }
  const gb::ChatFormatter formatter = gb::ChatFormatter::create(source, "<s>", "</s>");
  const std::vector<gb::ChatMessage> messages = {
      {"system", "You are terse.", ""},
      {"user", "Hi <|im_start|>there", ""},
      {"assistant", "Hello.", "The user greets me."},
      {"user", "Tell me a story.", ""},
  };
  for (const bool generation_prompt : {true, false}) {
    gb::ChatRenderOptions options;
    options.add_generation_prompt = generation_prompt;
    options.now = now;
    const gb::ChatPrompt prompt = formatter.render(messages, options);
    for (const auto& [begin, end] : prompt.content_spans)
      if (begin > end || end > prompt.text.size()) gbfuzz::fuzz_fail("a content span lies outside the prompt");
  }
  return 0;
}
