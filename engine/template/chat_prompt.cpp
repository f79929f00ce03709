// Chat formatting in the engine (see chat_prompt.h).
#include "template/chat_prompt.h"

#include <algorithm>
#include <unordered_map>

#include "tokenizer/tokenizer.h"

namespace gb {
namespace {

struct BuiltinRow {
  BuiltinChatFormat format;
  std::string_view name;
  std::string_view marker;  // text in a model template that identifies the format
  std::string_view source;  // Jinja, rendered like any model template
};

// The built-in formats, as data. BOS is spelled by each template (no BOS is
// added at tokenization), as in the models' own templates.
constexpr BuiltinRow kBuiltins[] = {
    {BuiltinChatFormat::ChatMl, "chatml", "<|im_start|>",
     "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
     "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"},
    {BuiltinChatFormat::Llama3, "llama3", "<|start_header_id|>",
     "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
     "{{ m.content | trim }}<|eot_id|>{% endfor %}"
     "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"},
    // Meta's Llama-2 chat format: the system prompt folds into the first user turn.
    {BuiltinChatFormat::Llama2, "llama2", "[INST]",
     "{% set ns = namespace(system='') %}{% for m in messages %}"
     "{% if m.role == 'system' %}{% set ns.system = m.content %}"
     "{% elif m.role == 'user' %}{{ bos_token }}[INST] {% if ns.system %}<<SYS>>\n{{ ns.system }}\n<</SYS>>\n\n"
     "{% set ns.system = '' %}{% endif %}{{ m.content | trim }} [/INST]"
     "{% elif m.role == 'assistant' %} {{ m.content | trim }} {{ eos_token }}{% endif %}{% endfor %}"},
    // Notebook mode for base models: the text continues as written.
    {BuiltinChatFormat::Plain, "plain", "", "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"},
};

const BuiltinRow& builtin_row(BuiltinChatFormat f) {
  for (const auto& row : kBuiltins)
    if (row.format == f) return row;
  return kBuiltins[3];
}

// The tokens that end a turn, by their text (llama.cpp's end-of-generation list).
constexpr std::string_view kEndOfGenerationPieces[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "</s>", "<|END_OF_TURN_TOKEN|>", "<EOT>", "<|eot|>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",  // DeepSeek's <｜end▁of▁sentence｜>
};

jinja::Value message_value(const ChatMessage& m) {
  jinja::Value d = jinja::Value::new_dict();
  d.dict->set(jinja::Value::from_string("role"), jinja::Value::from_string(m.role));
  d.dict->set(jinja::Value::from_string("content"), jinja::Value::from_string(m.content));
  if (!m.reasoning.empty())
    d.dict->set(jinja::Value::from_string("reasoning_content"), jinja::Value::from_string(m.reasoning));
  if (m.fields.is_dict())
    for (const auto& [k, v] : m.fields.dict->entries) d.dict->set(k, v);
  return d;
}

// Finds each message's content in the rendering, in order: those bytes are what
// the user typed, so control-token spellings in them stay text.
std::vector<std::pair<size_t, size_t>> find_content_spans(const std::string& text,
                                                          const std::vector<ChatMessage>& messages) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t cursor = 0;
  for (const auto& m : messages) {
    for (const std::string* part : {&m.reasoning, &m.content}) {
      if (part->empty()) continue;
      size_t at = text.find(*part, cursor);
      if (at == std::string::npos) at = text.find(*part);  // a template may reorder (system first)
      if (at == std::string::npos) continue;
      spans.emplace_back(at, at + part->size());
      cursor = std::max(cursor, at + part->size());
    }
  }
  std::sort(spans.begin(), spans.end());
  return spans;
}

}  // namespace

std::string_view builtin_chat_format_name(BuiltinChatFormat format) { return builtin_row(format).name; }

std::optional<BuiltinChatFormat> builtin_chat_format_from_name(std::string_view name) {
  for (const auto& row : kBuiltins)
    if (row.name == name) return row.format;
  return std::nullopt;
}

BuiltinChatFormat detect_builtin_chat_format(std::string_view chat_template) {
  for (const auto& row : kBuiltins)
    if (!row.marker.empty() && chat_template.find(row.marker) != std::string_view::npos) return row.format;
  return BuiltinChatFormat::Plain;
}

std::string_view builtin_chat_format_source(BuiltinChatFormat format) { return builtin_row(format).source; }

ChatFormatter ChatFormatter::create(const std::string& model_template, std::string bos_token, std::string eos_token,
                                    std::optional<BuiltinChatFormat> forced) {
  ChatFormatter f;
  f.bos_token_ = std::move(bos_token);
  f.eos_token_ = std::move(eos_token);
  f.fallback_ = forced.value_or(detect_builtin_chat_format(model_template));
  f.builtin_ = std::make_shared<const ChatTemplate>(ChatTemplate::compile(std::string(builtin_chat_format_source(f.fallback_))));
  if (forced || model_template.empty()) return f;
  auto tpl = std::make_shared<const ChatTemplate>(ChatTemplate::compile(model_template));
  if (tpl->ok()) {
    f.model_ = std::move(tpl);
  } else {
    f.load_warning_ = "the model's chat template does not parse (" + tpl->failure()->describe() +
                      "); using the built-in " + std::string(builtin_chat_format_name(f.fallback_)) + " format";
  }
  return f;
}

std::string ChatFormatter::format_name() const {
  return model_ ? "model" : std::string(builtin_chat_format_name(fallback_));
}

ChatPrompt ChatFormatter::render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const {
  jinja::Value ctx = jinja::Value::new_dict();
  jinja::List list;
  for (const auto& m : messages) list.push_back(message_value(m));
  ctx.dict->set(jinja::Value::from_string("messages"), jinja::Value::from_list(std::move(list)));
  ctx.dict->set(jinja::Value::from_string("add_generation_prompt"), jinja::Value::from_bool(options.add_generation_prompt));
  if (!bos_token_.empty()) ctx.dict->set(jinja::Value::from_string("bos_token"), jinja::Value::from_string(bos_token_));
  if (!eos_token_.empty()) ctx.dict->set(jinja::Value::from_string("eos_token"), jinja::Value::from_string(eos_token_));
  if (options.extra.is_dict())
    for (const auto& [k, v] : options.extra.dict->entries) ctx.dict->set(k, v);
  TemplateRenderOptions render_options;
  render_options.now = options.now;

  ChatPrompt prompt;
  prompt.warning = load_warning_;
  if (model_) {
    TemplateOutcome out = model_->render(ctx, render_options);
    if (out.ok()) {
      prompt.text = std::move(out.text);
      prompt.format = "model";
      prompt.template_hash = model_->hash();
      prompt.content_spans = find_content_spans(prompt.text, messages);
      return prompt;
    }
    prompt.warning = "the model's chat template failed: " + out.failure->describe() + "; using the built-in " +
                     std::string(builtin_chat_format_name(fallback_)) + " format";
  }
  TemplateOutcome out = builtin_->render(ctx, render_options);
  if (!out.ok()) {
    // A built-in format only fails on absurd input (e.g. over the output limit).
    prompt.warning += (prompt.warning.empty() ? "" : "; ") + out.failure->describe();
  }
  prompt.text = std::move(out.text);
  prompt.format = std::string(builtin_chat_format_name(fallback_));
  prompt.template_hash = builtin_->hash();
  prompt.content_spans = find_content_spans(prompt.text, messages);
  return prompt;
}

std::vector<TokenId> tokenize_chat_prompt(const Tokenizer& tokenizer, const ChatPrompt& prompt) {
  // Control tokens by first byte, longest first.
  std::unordered_map<char, std::vector<std::pair<std::string, TokenId>>> specials;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.is_control(id)) continue;
    std::string piece = tokenizer.token_piece(id);
    if (!piece.empty()) specials[piece[0]].emplace_back(std::move(piece), id);
  }
  for (auto& [c, list] : specials)
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });

  const std::string& text = prompt.text;
  std::vector<TokenId> ids;
  size_t span = 0, fragment_start = 0;
  auto flush = [&](size_t end) {
    if (end > fragment_start) {
      const auto part = tokenizer.encode(std::string_view(text).substr(fragment_start, end - fragment_start), false);
      ids.insert(ids.end(), part.begin(), part.end());
    }
  };
  for (size_t pos = 0; pos < text.size();) {
    while (span < prompt.content_spans.size() && prompt.content_spans[span].second <= pos) ++span;
    if (span < prompt.content_spans.size() && prompt.content_spans[span].first <= pos) {
      pos = prompt.content_spans[span].second;  // user-typed text: no control tokens
      continue;
    }
    const TokenId* match = nullptr;
    size_t match_len = 0;
    if (auto it = specials.find(text[pos]); it != specials.end()) {
      for (const auto& [piece, id] : it->second) {
        if (text.compare(pos, piece.size(), piece) == 0) {
          match = &id;
          match_len = piece.size();
          break;
        }
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    flush(pos);
    ids.push_back(*match);
    pos += match_len;
    fragment_start = pos;
  }
  flush(text.size());
  return ids;
}

std::vector<TokenId> end_of_generation_ids(const Tokenizer& tokenizer) {
  // The vocabulary's own set (EOS, tokenizer.ggml.eot/eom ids ...), plus every
  // control token whose text names an end of turn.
  std::vector<TokenId> ids = tokenizer.end_of_generation_ids();
  if (tokenizer.eos_id() >= 0) ids.push_back(tokenizer.eos_id());
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.is_control(id)) continue;
    const std::string piece = tokenizer.token_piece(id);
    for (auto eog : kEndOfGenerationPieces)
      if (piece == eog) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

ReasoningSplit split_reasoning(std::string_view text, std::string_view open_marker, std::string_view close_marker) {
  ReasoningSplit out;
  auto trim_leading = [](std::string_view s) {
    while (!s.empty() && (s.front() == '\n' || s.front() == ' ' || s.front() == '\r' || s.front() == '\t'))
      s.remove_prefix(1);
    return s;
  };
  const size_t open = text.find(open_marker);
  const size_t close = text.find(close_marker, open == std::string_view::npos ? 0 : open + open_marker.size());
  if (open == std::string_view::npos && close == std::string_view::npos) {
    out.answer = std::string(text);
    return out;
  }
  const size_t body = open == std::string_view::npos ? 0 : open + open_marker.size();
  const std::string_view before = open == std::string_view::npos ? std::string_view() : text.substr(0, open);
  if (close == std::string_view::npos) {
    out.reasoning = std::string(text.substr(body));
    out.answer = std::string(before);
    out.open = true;
    return out;
  }
  out.reasoning = std::string(text.substr(body, close - body));
  out.answer = std::string(before) + std::string(trim_leading(text.substr(close + close_marker.size())));
  return out;
}

}  // namespace gb
