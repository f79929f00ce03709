// Structured output in a request body, for parse_api_request: the fields that
// make the engine constrain an answer with a grammar (SamplerSettings::format),
// and chat's tools.
//
//   response_format   {"type": "text"} (no format), {"type": "json_object"} (any
//                     JSON object; with llama.cpp's "schema" beside it, that
//                     schema), {"type": "json_schema", "json_schema": {"name",
//                     "schema", "strict", "description"}}; both endpoints
//   grammar           GBNF text (llama.cpp's field)
//   json_schema       a JSON Schema object (llama.cpp's field)
//   guided_json, guided_regex, guided_grammar, guided_choice   vLLM's fields
//   tools, tool_choice, parallel_tool_calls   chat: the functions (a variable of
//                     the chat template); "required" or a named function
//                     constrains the answer to a call (tool_call_schema below)
//
// At most one of them may constrain a request; a second is a 400 naming it. A
// format is compiled here (to GBNF and to a grammar, without the vocabulary), so
// a schema with an unsupported keyword, a bad GBNF or regex is a 400 naming the
// field with the compiler's message (the keyword and its JSON pointer); what
// only the vocabulary can tell (a grammar no token sequence satisfies) is
// refused at submit, again a 400 naming the field (ApiRequest::format_param).
// Schemas keep their key order (properties are written in schema order).
// Threads: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/openai_request.h"

namespace gb::server {

// response_format, grammar, json_schema, guided_* -> r.sampling.format and r.format_param.
std::optional<ApiError> parse_output_format(const nlohmann::ordered_json& body, ApiRequest& r);

// tools, tool_choice, parallel_tool_calls -> r.tools; the tools list into
// `template_vars["tools"]`; for "required" or a named function the call's
// schema as r.sampling.format (after parse_output_format: a second format is a 400).
std::optional<ApiError> parse_tools(const nlohmann::ordered_json& body, ApiRequest& r,
                                    nlohmann::ordered_json& template_vars);

// The JSON Schema of a forced answer: an object {"name": <one of the functions>,
// "arguments": <that function's parameters>} (an anyOf over the functions; with
// `parallel`, also an array of one or more such objects). `functions` are the
// request's tools[i].function objects that may be called. Each function's
// parameters move to $defs (their "#..." references rebased), so pydantic's
// "$defs" schemas keep working; no parameters means an empty object.
nlohmann::ordered_json tool_call_schema(const std::vector<const nlohmann::ordered_json*>& functions, bool parallel);

// A message's tool fields (an assistant's tool_calls; tool_call_id and name)
// -> msg.tool_fields_json; `where` is "messages[i]".
std::optional<ApiError> parse_message_tool_fields(const nlohmann::ordered_json& m, const std::string& where,
                                                  ApiMessage& msg);

}  // namespace gb::server
