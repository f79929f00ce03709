// Tool calls in a model's answer: the text a chat model wrote, read back as
// OpenAI's `tool_calls` (function name + JSON arguments) and the content around
// them.
//
// Models spell a call in their own chat template's form; the forms we recognise
// are one table (kToolCallWrappers in tool_calls.cpp), each row an opening marker,
// a closing marker ("" = the call runs to the next opening marker or the end) and
// how the body reads:
//   <tool_call>{...}</tool_call>        Qwen 2/2.5/3, Hermes 2/3 (repeated per call)
//   [TOOL_CALLS][{...}, ...]            Mistral (v3); also [TOOL_CALLS]name[ARGS]{...} (v11+)
//   <|python_tag|>{...}                 Llama 3.1/3.2 JSON calls
//   <|tool_call|>[...]<|/tool_call|>    Phi-4-mini, Granite
//   functools[...]                      FireFunction v2
//   ```json {...} ```                   a fenced block, as small models write it
// and a bare JSON object or array at the start of the answer (the form the
// server's grammar makes a model write for tool_choice "required" or a named
// function). A call body is an object {"name", "arguments" | "parameters"}
// (also OpenAI's own {"type": "function", "function": {...}}), several of them
// in an array or one after another. Arguments given as an object are returned
// as its compact JSON text, key order kept; given as a string, verbatim.
//
// An answer counts as tool calls only when every call region parses and every
// name is one of the request's tools; otherwise it is all content (malformed
// JSON, an unknown function: the client sees what the model wrote).
//
// ToolCallStreamer applies the same reading to a stream: it releases content as
// it arrives and holds back text from where a call may begin (an opening marker,
// a prefix of one at the end of the text so far, or a JSON value starting the
// answer), so no part of a call is ever sent as content.
// Threads: pure functions; a streamer belongs to one handler thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gb::server {

struct ToolCall {
  std::string id;         // "call_" + 24 random letters and digits
  std::string name;       // the function's name
  std::string arguments;  // JSON text (an object's compact serialization)
};

struct ParsedToolCalls {
  std::string content;          // the text outside the calls (everything when there are none)
  std::vector<ToolCall> calls;  // empty: the answer is not a tool call
};

// Where a tool call may start in `text`: the earliest opening marker of the
// table, or the first non-space byte when it is '{' or '['. npos if none.
size_t find_tool_call_start(std::string_view text);

// Reads `text` as described above. `tool_names`: the request's functions (a
// call naming another makes the answer plain content); empty accepts any name.
ParsedToolCalls parse_tool_calls(std::string_view text, const std::vector<std::string>& tool_names);

// "call_" and 24 random [A-Za-z0-9].
std::string make_tool_call_id();

class ToolCallStreamer {
 public:
  // `forced`: the answer is a call from its first byte (the grammar made it
  // so): everything is held until the end.
  ToolCallStreamer(std::vector<std::string> tool_names, bool forced)
      : tool_names_(std::move(tool_names)), forced_(forced) {}

  // The content `text` lets through now (possibly "").
  std::string feed(std::string_view text);
  // At the end of the answer: the content still held (when it was not a call)
  // or what follows the calls, and the calls.
  ParsedToolCalls finish();

 private:
  std::vector<std::string> tool_names_;
  bool forced_ = false;
  std::string text_;       // the whole answer so far
  size_t num_released_ = 0;  // bytes of text_ released as content
  bool holding_ = false;     // a call may have started at num_released_
};

}  // namespace gb::server
