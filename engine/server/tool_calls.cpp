// Tool calls read back from a model's answer (see tool_calls.h).
#include "server/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

namespace gb::server {

namespace {

using ojson = nlohmann::ordered_json;

// How the text between a wrapper's markers reads.
enum class CallBody {
  Json,        // one or more JSON calls: objects, or arrays of them
  JsonOrNamed  // as Json, or `name[ARGS]{arguments}` (Mistral's v11 templates)
};

struct ToolCallWrapper {
  std::string_view family;  // who writes it (for the reader of this table)
  std::string_view open;
  std::string_view close;   // "": the call runs to the next `open` or the end of the answer
  CallBody body;
};

// Variation as data: a new model family's form is one more row.
constexpr ToolCallWrapper kToolCallWrappers[] = {
    {"qwen, hermes", "<tool_call>", "</tool_call>", CallBody::Json},
    {"mistral", "[TOOL_CALLS]", "", CallBody::JsonOrNamed},
    {"llama 3.1+", "<|python_tag|>", "", CallBody::Json},
    {"phi-4-mini, granite", "<|tool_call|>", "<|/tool_call|>", CallBody::Json},
    {"firefunction v2", "functools", "", CallBody::Json},
    {"fenced block", "```json", "```", CallBody::Json},
};

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_json_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_json_space(s[pos])) ++pos;
  return pos;
}

// One past the end of the JSON object or array that starts at s[pos] ('{' or
// '['), by bracket depth outside strings; npos when it does not close.
size_t json_value_end(std::string_view s, size_t pos) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

bool name_allowed(const std::string& name, const std::vector<std::string>& tool_names) {
  return tool_names.empty() || std::find(tool_names.begin(), tool_names.end(), name) != tool_names.end();
}

// The arguments' JSON text: an object compact (key order kept), a string as
// written, absent or null as {}; anything else is not a call.
bool arguments_text(const ojson* args, std::string& out) {
  if (args == nullptr || args->is_null()) out = "{}";
  else if (args->is_object()) out = args->dump(-1, ' ', false, ojson::error_handler_t::replace);
  else if (args->is_string()) out = args->get<std::string>();
  else return false;
  return true;
}

// {"name", "arguments" | "parameters"} or {"type": "function", "function": {...}}.
bool read_call_object(const ojson& o, const std::vector<std::string>& tool_names, std::vector<ToolCall>& out) {
  if (!o.is_object()) return false;
  const ojson* obj = &o;
  if (auto f = o.find("function"); f != o.end() && f->is_object() && !o.contains("name")) obj = &*f;
  auto name = obj->find("name");
  if (name == obj->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return false;
  const ojson* args = nullptr;
  for (const char* key : {"arguments", "parameters"})
    if (auto a = obj->find(key); a != obj->end() && args == nullptr) args = &*a;
  ToolCall call;
  call.name = name->get<std::string>();
  if (!name_allowed(call.name, tool_names) || !arguments_text(args, call.arguments)) return false;
  out.push_back(std::move(call));
  return true;
}

// Calls written as JSON from s[pos]: objects or arrays of objects, one after
// another (separated by space, ',' or ';'). Returns where the last one ended,
// or npos when the first does not parse or any is not a call.
size_t read_json_calls(std::string_view s, size_t pos, const std::vector<std::string>& tool_names,
                       std::vector<ToolCall>& out) {
  size_t end = std::string_view::npos;
  pos = skip_json_space(s, pos);
  while (pos < s.size() && (s[pos] == '{' || s[pos] == '[')) {
    const size_t value_end = json_value_end(s, pos);
    if (value_end == std::string_view::npos) return std::string_view::npos;
    const ojson v = ojson::parse(s.substr(pos, value_end - pos), nullptr, false);
    if (v.is_discarded() || (v.is_array() && v.empty())) return std::string_view::npos;
    if (v.is_array()) {
      for (const ojson& item : v)
        if (!read_call_object(item, tool_names, out)) return std::string_view::npos;
    } else if (!read_call_object(v, tool_names, out)) {
      return std::string_view::npos;
    }
    end = value_end;
    pos = skip_json_space(s, value_end);
    if (pos < s.size() && (s[pos] == ',' || s[pos] == ';')) pos = skip_json_space(s, pos + 1);
  }
  return end;
}

// `name[ARGS]{...}`: Mistral's newer templates.
bool read_named_call(std::string_view body, const std::vector<std::string>& tool_names, std::vector<ToolCall>& out) {
  constexpr std::string_view kArgs = "[ARGS]";
  const size_t args_at = body.find(kArgs);
  if (args_at == std::string_view::npos) return false;
  std::string_view name = body.substr(0, args_at);
  while (!name.empty() && is_json_space(name.front())) name.remove_prefix(1);
  while (!name.empty() && is_json_space(name.back())) name.remove_suffix(1);
  const size_t start = skip_json_space(body, args_at + kArgs.size());
  if (name.empty() || start >= body.size() || body[start] != '{') return false;
  const size_t end = json_value_end(body, start);
  if (end == std::string_view::npos || skip_json_space(body, end) != body.size()) return false;
  const ojson args = ojson::parse(body.substr(start, end - start), nullptr, false);
  if (args.is_discarded()) return false;
  ToolCall call;
  call.name = std::string(name);
  if (!name_allowed(call.name, tool_names) || !arguments_text(&args, call.arguments)) return false;
  out.push_back(std::move(call));
  return true;
}

// The body between a wrapper's markers: calls and nothing else but space.
bool read_wrapped_calls(std::string_view body, CallBody kind, const std::vector<std::string>& tool_names,
                        std::vector<ToolCall>& out) {
  const size_t first = skip_json_space(body, 0);
  if (first < body.size() && (body[first] == '{' || body[first] == '[')) {
    const size_t end = read_json_calls(body, first, tool_names, out);
    return end != std::string_view::npos && skip_json_space(body, end) == body.size();
  }
  return kind == CallBody::JsonOrNamed && read_named_call(body, tool_names, out);
}

struct CallStart {
  size_t pos = std::string_view::npos;
  const ToolCallWrapper* wrapper = nullptr;  // null: a bare JSON value
};

// The earliest opening marker at or after `from`, or a bare JSON value when
// `text` starts with one (after space).
CallStart find_call_start(std::string_view text, size_t from) {
  CallStart start;
  for (const ToolCallWrapper& w : kToolCallWrappers) {
    const size_t at = text.find(w.open, from);
    if (at < start.pos) start = {at, &w};
  }
  const size_t first = skip_json_space(text, 0);
  if (first < text.size() && first >= from && first < start.pos && (text[first] == '{' || text[first] == '['))
    start = {first, nullptr};
  return start;
}

}  // namespace

size_t find_tool_call_start(std::string_view text) { return find_call_start(text, 0).pos; }

ParsedToolCalls parse_tool_calls(std::string_view text, const std::vector<std::string>& tool_names) {
  const ParsedToolCalls as_content{std::string(text), {}};
  const CallStart start = find_call_start(text, 0);
  if (start.pos == std::string_view::npos) return as_content;
  ParsedToolCalls out;
  out.content = std::string(text.substr(0, start.pos));
  size_t pos = start.pos;
  if (start.wrapper == nullptr) {
    pos = read_json_calls(text, pos, tool_names, out.calls);
    if (pos == std::string_view::npos) return as_content;
  } else {
    const ToolCallWrapper& w = *start.wrapper;
    while (text.substr(pos, w.open.size()) == w.open) {
      const size_t body = pos + w.open.size();
      // Without a closing marker (or when the model stopped before writing it)
      // the call runs to the next opening marker or the end.
      const size_t close = w.close.empty() ? text.find(w.open, body) : text.find(w.close, body);
      const size_t body_end = close == std::string_view::npos ? text.size() : close;
      if (!read_wrapped_calls(text.substr(body, body_end - body), w.body, tool_names, out.calls)) return as_content;
      pos = close == std::string_view::npos ? text.size() : w.close.empty() ? close : close + w.close.size();
      const size_t next = skip_json_space(text, pos);
      if (text.substr(next, w.open.size()) == w.open) pos = next;
    }
  }
  out.content += std::string(text.substr(pos));
  for (ToolCall& call : out.calls) call.id = make_tool_call_id();
  return out;
}

std::string make_tool_call_id() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "call_";
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

std::string ToolCallStreamer::feed(std::string_view text) {
  text_ += text;
  if (forced_ || holding_) return {};
  if (num_released_ == 0 && skip_json_space(text_, 0) == text_.size()) return {};  // only space yet: a call may follow
  const CallStart start = find_call_start(text_, num_released_);
  size_t release_end = text_.size();
  if (start.pos != std::string_view::npos) {
    holding_ = true;
    release_end = start.pos;
  } else {
    // Keep back a tail that may be the beginning of an opening marker.
    size_t keep = 0;
    for (const ToolCallWrapper& w : kToolCallWrappers)
      for (size_t k = std::min(w.open.size() - 1, text_.size() - num_released_); k > keep; --k)
        if (std::string_view(text_).substr(text_.size() - k) == w.open.substr(0, k)) {
          keep = k;
          break;
        }
    release_end = text_.size() - keep;
  }
  std::string out = text_.substr(num_released_, release_end - num_released_);
  num_released_ = release_end;
  return out;
}

ParsedToolCalls ToolCallStreamer::finish() {
  ParsedToolCalls parsed = parse_tool_calls(text_, tool_names_);
  if (parsed.calls.empty()) return {text_.substr(num_released_), {}};
  // The released content is the text before the first call, which the parse's
  // content starts with (both find the start the same way).
  parsed.content = parsed.content.size() >= num_released_ ? parsed.content.substr(num_released_) : std::string();
  return parsed;
}

}  // namespace gb::server
