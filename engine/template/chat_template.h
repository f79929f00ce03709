// ChatTemplate: a model's chat template (the Jinja text of `tokenizer.chat_template`)
// compiled once and rendered the way Hugging Face transformers' apply_chat_template
// renders it (trim_blocks, lstrip_blocks, loopcontrols, raise_exception,
// strftime_now, tojson = json.dumps) inside the sandbox of jinja_interpreter.h.
// One renderer serves the CLI, the workbench and the engine's chat formatting.
//
// Errors never throw: compile() records a TemplateFailure (syntax error, unknown
// filter or test, with line and column) and render() returns one (runtime error,
// raise_exception message verbatim, sandbox limit).
// Threads: a compiled template is immutable; render() may run on any thread and
// concurrently (each call has its own interpreter).
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "template/jinja_error.h"
#include "template/jinja_interpreter.h"
#include "template/jinja_value.h"

namespace gb::jinja {
struct Template;
}

namespace gb {

struct TemplateFailure {
  jinja::ErrorKind kind = jinja::ErrorKind::Syntax;
  std::string message;  // a raise_exception message verbatim; otherwise without position
  int line = 0;         // 1-based, 0 = unknown
  int column = 0;       // 1-based, in code points

  // "line 12, column 5: unexpected 'endif'" (or the raised message alone).
  std::string describe() const;
};

struct TemplateOutcome {
  std::string text;                        // the rendering, when ok()
  std::optional<TemplateFailure> failure;  // set on error
  bool ok() const { return !failure.has_value(); }
};

struct TemplateRenderOptions {
  jinja::RenderLimits limits;
  std::optional<std::tm> now;  // strftime_now()'s clock; the local time when absent
};

class ChatTemplate {
 public:
  static ChatTemplate compile(std::string source);

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  bool ok() const { return !failure_.has_value(); }
  const std::optional<TemplateFailure>& failure() const { return failure_; }
  const std::string& source() const { return source_; }
  // SHA-256 of the source text (lowercase hex): the template's identity, e.g. in
  // the prefix-cache isolation key.
  const std::string& hash() const { return hash_; }

  // `context` is a Dict of render variables (messages, tools, add_generation_prompt,
  // bos_token, eos_token, extra keywords).
  TemplateOutcome render(const jinja::Value& context, const TemplateRenderOptions& options = {}) const;

 private:
  ChatTemplate() = default;
  std::string source_;
  std::string hash_;
  std::unique_ptr<jinja::Template> tree_;
  std::optional<TemplateFailure> failure_;
};

// JSON text -> Value, keeping object key order (tojson and dict.items() depend on it).
Result<jinja::Value> json_to_value(std::string_view json_text);
// "2025-03-14T09:26:53" (seconds optional) -> broken-down local time.
Result<std::tm> parse_iso_time(std::string_view text);

}  // namespace gb
