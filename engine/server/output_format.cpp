// Structured output fields of a request (see output_format.h).
#include "server/output_format.h"

#include <algorithm>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "runtime/grammar_constraint.h"

namespace gb::server {

namespace {

using ojson = nlohmann::ordered_json;
using FieldOutcome = std::optional<ApiError>;

// How a field that sets the format reads.
enum class FormatShape {
  ResponseFormat,      // OpenAI's {"type": ...}
  GbnfText,            // a GBNF grammar as a string
  SchemaValue,         // a JSON Schema: an object (or a boolean schema)
  SchemaValueOrText,   // the same, or its JSON text
  RegexText,           // a regular expression as a string
  Choices,             // an array of strings: the answer is one of them
};

struct FormatSource {
  const char* name;
  FormatShape shape;
};

// Variation as data: OpenAI's field, then llama.cpp's, then vLLM's.
constexpr FormatSource kFormatSources[] = {
    {"response_format", FormatShape::ResponseFormat},
    {"grammar", FormatShape::GbnfText},
    {"json_schema", FormatShape::SchemaValue},
    {"guided_json", FormatShape::SchemaValueOrText},
    {"guided_regex", FormatShape::RegexText},
    {"guided_grammar", FormatShape::GbnfText},
    {"guided_choice", FormatShape::Choices},
};

std::string compact(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

const std::string* text_at(const ojson& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

FieldOutcome read_response_format(const ojson& v, FormatSettings& out) {
  const char* param = "response_format";
  const std::string* type = text_at(v, "type");
  if (type == nullptr)
    return bad_param(param, "response_format must be an object with a string type (text, json_object or json_schema)");
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    // llama.cpp's extension: a schema beside json_object constrains to it.
    auto schema = v.find("schema");
    if (schema == v.end() || schema->is_null()) {
      out = {FormatKind::Json, ""};
      return std::nullopt;
    }
    if (!schema->is_object() && !schema->is_boolean())
      return bad_param(param, "response_format.schema must be a JSON Schema object");
    out = {FormatKind::JsonSchema, compact(*schema)};
    return std::nullopt;
  }
  if (*type != "json_schema")
    return bad_param(param, "response_format.type '" + *type + "' is not one of text, json_object, json_schema");
  auto js = v.find("json_schema");
  if (js == v.end() || !js->is_object())
    return bad_param(param, "response_format.json_schema must be an object with a schema");
  if (auto name = js->find("name"); name != js->end() && !name->is_null() && !name->is_string())
    return bad_param(param, "response_format.json_schema.name must be a string");
  if (auto strict = js->find("strict"); strict != js->end() && !strict->is_null() && !strict->is_boolean())
    return bad_param(param, "response_format.json_schema.strict must be true or false");
  auto schema = js->find("schema");
  // OpenAI lets the schema be left out (any JSON object then).
  if (schema == js->end() || schema->is_null()) {
    out = {FormatKind::Json, ""};
    return std::nullopt;
  }
  if (!schema->is_object() && !schema->is_boolean())
    return bad_param(param, "response_format.json_schema.schema must be a JSON Schema object");
  out = {FormatKind::JsonSchema, compact(*schema)};
  return std::nullopt;
}

// One field of kFormatSources; `out` stays None when it asks for no format.
FieldOutcome read_format_source(const FormatSource& src, const ojson& v, FormatSettings& out) {
  const std::string name = src.name;
  switch (src.shape) {
    case FormatShape::ResponseFormat: return read_response_format(v, out);
    case FormatShape::GbnfText:
    case FormatShape::RegexText:
      if (!v.is_string()) return bad_param(name, name + " must be a string");
      if (!v.get_ref<const std::string&>().empty())  // llama.cpp's clients send "" for none
        out = {src.shape == FormatShape::GbnfText ? FormatKind::Gbnf : FormatKind::Regex, v.get<std::string>()};
      return std::nullopt;
    case FormatShape::SchemaValue:
    case FormatShape::SchemaValueOrText:
      if (v.is_string() && src.shape == FormatShape::SchemaValueOrText) {
        out = {FormatKind::JsonSchema, v.get<std::string>()};
        return std::nullopt;
      }
      if (!v.is_object() && !v.is_boolean()) return bad_param(name, name + " must be a JSON Schema object");
      out = {FormatKind::JsonSchema, compact(v)};
      return std::nullopt;
    case FormatShape::Choices: {
      if (!v.is_array() || v.empty() || v.size() > 1024)
        return bad_param(name, name + " must be an array of 1 to 1024 strings");
      std::string gbnf = "root ::= ";
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string()) return bad_param(name, name + " must be an array of 1 to 1024 strings");
        gbnf += (i ? " | " : "") + gbnf_literal(v[i].get_ref<const std::string&>());
      }
      out = {FormatKind::Gbnf, gbnf + "\n"};
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// Compiles the format as far as it can without the vocabulary; the error names
// the field and carries the compiler's message (keyword, pointer, position).
ApiError format_error(const std::string& param, const std::string& message) {
  const bool named = message.rfind(param + ":", 0) == 0;  // the GBNF compiler's own "grammar: ..."
  return bad_param(param, named ? message : param + ": " + message);
}

FieldOutcome check_format(const FormatSettings& format, const std::string& param) {
  auto gbnf = format_to_gbnf(format);
  if (!gbnf) return format_error(param, gbnf.error().message);
  auto grammar = compile_gbnf(*gbnf);
  if (!grammar) return format_error(param, grammar.error().message);
  return std::nullopt;
}

// Rebases the document's own references ("#", "#/$defs/X") onto `base`
// ("#/$defs/t0"), so a schema moved under $defs still finds its definitions.
// Values that are data, not schemas (const, enum, default, examples), are left alone.
void rebase_refs(ojson& schema, const std::string& base) {
  if (schema.is_array()) {
    for (ojson& item : schema) rebase_refs(item, base);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key == "$ref" && value.is_string() && value.get_ref<const std::string&>().rfind('#', 0) == 0)
      value = base + value.get<std::string>().substr(1);
    else if (key != "const" && key != "enum" && key != "default" && key != "examples")
      rebase_refs(value, base);
  }
}

// The parameters of tools[i].function, or the schema of an empty argument list.
ojson parameters_of(const ojson& function) {
  auto p = function.find("parameters");
  if (p == function.end() || p->is_null())
    return ojson{{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
  return *p;
}

FieldOutcome parse_tool_choice(const ojson& body, ApiRequest& r) {
  r.tools.choice = r.tools.names.empty() ? ToolChoice::None : ToolChoice::Auto;
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    if (s == "none") r.tools.choice = ToolChoice::None;
    else if (s == "auto") r.tools.choice = r.tools.names.empty() ? ToolChoice::None : ToolChoice::Auto;
    else if (s == "required") r.tools.choice = ToolChoice::Required;
    else return bad_param("tool_choice", "tool_choice '" + s + "' is not one of none, auto, required or a function");
  } else {
    const std::string* type = text_at(*it, "type");
    const std::string* name = it->is_object() && it->contains("function") ? text_at((*it)["function"], "name") : nullptr;
    if (type == nullptr || *type != "function" || name == nullptr)
      return bad_param("tool_choice",
                       "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    r.tools.choice = ToolChoice::Named;
    r.tools.forced_name = *name;
  }
  if (r.tools.forced() && r.tools.names.empty())
    return bad_param("tool_choice", "tool_choice '" + std::string(r.tools.choice == ToolChoice::Named ? "function" : "required") +
                                        "' needs tools");
  if (r.tools.choice == ToolChoice::Named &&
      std::find(r.tools.names.begin(), r.tools.names.end(), r.tools.forced_name) == r.tools.names.end())
    return bad_param("tool_choice", "tool_choice names the function '" + r.tools.forced_name + "', which is not in tools");
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_output_format(const nlohmann::ordered_json& body, ApiRequest& r) {
  for (const FormatSource& src : kFormatSources) {
    auto it = body.find(src.name);
    if (it == body.end() || it->is_null()) continue;
    FormatSettings format;
    if (FieldOutcome e = read_format_source(src, *it, format)) return e;
    if (format.kind == FormatKind::None) continue;
    if (r.sampling.format.kind != FormatKind::None)
      return bad_param(src.name, std::string(src.name) + " and " + r.format_param +
                                     " both constrain the answer; give at most one");
    r.sampling.format = std::move(format);
    r.format_param = src.name;
  }
  if (r.sampling.format.kind == FormatKind::None) return std::nullopt;
  return check_format(r.sampling.format, r.format_param);
}

std::optional<ApiError> parse_tools(const nlohmann::ordered_json& body, ApiRequest& r, nlohmann::ordered_json& template_vars) {
  std::vector<const ojson*> functions;
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return bad_param("tools", "tools must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const ojson& t = (*it)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return bad_param("tools", "every entry of tools must be an object");
      if (const std::string* type = text_at(t, "type"); type != nullptr && *type != "function")
        return bad_param(where + ".type", where + ".type '" + *type + "': only function tools are supported");
      auto f = t.find("function");
      if (f == t.end() || !f->is_object()) return bad_param(where + ".function", where + ".function must be an object");
      const std::string* name = text_at(*f, "name");
      if (name == nullptr || name->empty())
        return bad_param(where + ".function.name", where + ".function.name must be a non-empty string");
      if (std::find(r.tools.names.begin(), r.tools.names.end(), *name) != r.tools.names.end())
        return bad_param(where + ".function.name", where + ".function.name '" + *name + "' is given twice");
      if (auto p = f->find("parameters"); p != f->end() && !p->is_null() && !p->is_object() && !p->is_boolean())
        return bad_param(where + ".function.parameters", where + ".function.parameters must be a JSON Schema object");
      r.tools.names.push_back(*name);
      functions.push_back(&*f);
    }
    if (!it->empty()) template_vars["tools"] = *it;
  }
  if (FieldOutcome e = parse_tool_choice(body, r)) return e;
  if (auto it = body.find("parallel_tool_calls"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad_param("parallel_tool_calls", "parallel_tool_calls must be true or false");
    r.tools.parallel = it->get<bool>();
  }
  if (!r.tools.forced()) return std::nullopt;
  if (r.sampling.format.kind != FormatKind::None)
    return bad_param("tool_choice", "tool_choice '" +
                                        std::string(r.tools.choice == ToolChoice::Named ? "function" : "required") +
                                        "' constrains the answer to a tool call, and so does " + r.format_param +
                                        "; give at most one");
  // Each callable function's parameters compile on their own first, so an
  // unsupported keyword is reported against the tool that has it.
  std::vector<const ojson*> callable;
  for (size_t i = 0; i < functions.size(); ++i) {
    if (r.tools.choice == ToolChoice::Named && r.tools.names[i] != r.tools.forced_name) continue;
    const std::string param = "tools[" + std::to_string(i) + "].function.parameters";
    if (auto gbnf = json_schema_to_gbnf(parameters_of(*functions[i])); !gbnf) return format_error(param, gbnf.error().message);
    callable.push_back(functions[i]);
  }
  r.sampling.format = {FormatKind::JsonSchema, compact(tool_call_schema(callable, r.tools.parallel))};
  r.format_param = "tool_choice";
  return check_format(r.sampling.format, r.format_param);
}

nlohmann::ordered_json tool_call_schema(const std::vector<const nlohmann::ordered_json*>& functions, bool parallel) {
  ojson defs = ojson::object();
  ojson calls = ojson::array();
  for (size_t i = 0; i < functions.size(); ++i) {
    const std::string key = "f" + std::to_string(i);
    ojson params = parameters_of(*functions[i]);
    rebase_refs(params, "#/$defs/" + key);
    defs[key] = std::move(params);
    ojson properties = ojson::object();
    properties["name"] = ojson{{"const", (*functions[i])["name"]}};
    properties["arguments"] = ojson{{"$ref", "#/$defs/" + key}};
    ojson call = ojson::object();
    call["type"] = "object";
    call["properties"] = std::move(properties);
    call["required"] = ojson::array({"name", "arguments"});
    call["additionalProperties"] = false;
    calls.push_back(std::move(call));
  }
  if (calls.size() == 1) {
    defs["call"] = calls[0];
  } else {
    defs["call"] = ojson::object();
    defs["call"]["anyOf"] = std::move(calls);
  }
  const ojson call_ref = ojson{{"$ref", "#/$defs/call"}};
  ojson root = ojson::object();
  root["$defs"] = std::move(defs);
  if (!parallel) {
    root["anyOf"] = ojson::array({call_ref});
    return root;
  }
  ojson many = ojson::object();
  many["type"] = "array";
  many["items"] = call_ref;
  many["minItems"] = 1;
  root["anyOf"] = ojson::array({call_ref, many});
  return root;
}

std::optional<ApiError> parse_message_tool_fields(const nlohmann::ordered_json& m, const std::string& where, ApiMessage& msg) {
  ojson fields = ojson::object();
  for (const char* key : {"tool_call_id", "name"}) {
    auto it = m.find(key);
    if (it == m.end() || it->is_null()) continue;
    if (!it->is_string()) return bad_param(where + "." + key, where + "." + key + " must be a string");
    fields[key] = *it;
  }
  if (auto it = m.find("tool_calls"); it != m.end() && !it->is_null()) {
    const std::string param = where + ".tool_calls";
    if (!it->is_array()) return bad_param(param, param + " must be an array");
    ojson calls = ojson::array();
    for (const ojson& c : *it) {
      const std::string* id = text_at(c, "id");
      const ojson* f = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
      const std::string* name = f ? text_at(*f, "name") : nullptr;
      if (name == nullptr)
        return bad_param(param, param + ": each call must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
      ojson args = ojson::object();
      if (auto a = f->find("arguments"); a != f->end() && !a->is_null()) {
        if (a->is_string()) {
          // Templates render arguments as a mapping (tojson, items()): JSON object text becomes one.
          ojson parsed = ojson::parse(a->get_ref<const std::string&>(), nullptr, false);
          args = !parsed.is_discarded() && parsed.is_object() ? parsed : *a;
        } else if (a->is_object()) {
          args = *a;
        } else {
          return bad_param(param, param + ": function.arguments must be a JSON string");
        }
      }
      ojson call = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", args}}}};
      if (id != nullptr) call["id"] = *id;
      calls.push_back(std::move(call));
    }
    fields["tool_calls"] = std::move(calls);
  }
  if (!fields.empty()) msg.tool_fields_json = compact(fields);
  return std::nullopt;
}

}  // namespace gb::server
