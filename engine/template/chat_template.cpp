// ChatTemplate (see chat_template.h).
#include "template/chat_template.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/exception_text.h"
#include "core/sha256.h"
#include "template/jinja_ast.h"
#include "template/jinja_builtins.h"
#include "template/jinja_parser.h"

namespace gb {

std::string TemplateFailure::describe() const {
  if (kind == jinja::ErrorKind::Raised) return message;
  if (line <= 0) return message;
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message;
}

namespace {

TemplateFailure to_failure(const jinja::TemplateError& e) {
  return TemplateFailure{e.kind, e.message, e.pos.line, e.pos.column};
}

// Jinja2 rejects unknown filters and tests when it compiles a template, so a
// typo fails at load time, not in the middle of a conversation.
void check_names(const jinja::Expr* e);
void check_args(const jinja::CallArgList& a) {
  for (const auto& p : a.positional) check_names(p.get());
  for (const auto& [k, v] : a.keyword) check_names(v.get());
  check_names(a.star.get());
  check_names(a.star_star.get());
}
void check_names(const jinja::Expr* e) {
  if (e == nullptr) return;
  if (e->kind == jinja::ExprKind::Filter && jinja::find_filter(e->name) == nullptr)
    throw jinja::TemplateError(jinja::ErrorKind::Syntax, "no filter named '" + e->name + "'", e->pos);
  if (e->kind == jinja::ExprKind::Test && jinja::find_test(e->name) == nullptr)
    throw jinja::TemplateError(jinja::ErrorKind::Syntax, "no test named '" + e->name + "'", e->pos);
  for (const auto& op : e->operands) check_names(op.get());
  check_args(e->args);
}
void check_names(const jinja::Body& body) {
  for (const auto& s : body) {
    check_names(s->expr.get());
    check_names(s->filter.get());
    for (const auto& c : s->conditions) check_names(c.get());
    for (const auto& v : s->values) check_names(v.get());
    for (const auto& p : s->params) check_names(p.default_value.get());
    for (const auto& b : s->bodies) check_names(b);
  }
}

jinja::Value from_json(const nlohmann::ordered_json& j) {
  using jinja::Value;
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::from_bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::from_int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::from_int(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value::from_float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::from_string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::List items;
      for (const auto& x : j) items.push_back(from_json(x));
      return Value::from_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::new_dict();
      for (const auto& [k, v] : j.items()) d.dict->entries.emplace_back(Value::from_string(k), from_json(v));
      return d;
    }
    default: return Value::none();
  }
}

}  // namespace

ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

ChatTemplate ChatTemplate::compile(std::string source) {
  ChatTemplate t;
  Sha256 sha;
  sha.update(source);
  t.hash_ = Sha256::hex(sha.finish());
  t.source_ = std::move(source);
  try {
    t.tree_ = std::make_unique<jinja::Template>(jinja::parse_template(t.source_));
    check_names(t.tree_->body);
  } catch (const jinja::TemplateError& e) {
    t.tree_.reset();
    t.failure_ = to_failure(e);
  }
  return t;
}

TemplateOutcome ChatTemplate::render(const jinja::Value& context, const TemplateRenderOptions& options) const {
  TemplateOutcome out;
  if (!tree_) {
    out.failure = failure_;
    return out;
  }
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  try {
    jinja::Interpreter interpreter(options.limits, now);
    out.text = interpreter.render(*tree_, context);
  } catch (const jinja::TemplateError& e) {
    out.failure = to_failure(e);
  } catch (const jinja::ValueError& e) {
    out.failure = TemplateFailure{jinja::ErrorKind::Runtime, e.what(), 0, 0};
  }
  return out;
}

Result<jinja::Value> json_to_value(std::string_view json_text) {
  try {
    return from_json(nlohmann::ordered_json::parse(json_text));
  } catch (const nlohmann::json::exception& e) {
    return make_error("invalid JSON: " + exception_sentence(e.what()));
  }
}

Result<jinja::Value> render_context_from_json(std::string_view json_text) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return make_error("invalid JSON: " + exception_sentence(e.what()));
  }
  if (!j.is_object()) return make_error("the context must be a JSON object of render variables");
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  for (const auto& [k, v] : j.items()) {
    if (k == "kwargs" && v.is_object()) continue;
    if (k == "template_messages") continue;
    if ((k == "bos_token" || k == "eos_token") && v.is_null()) continue;
    ctx[k] = v;
  }
  if (j.contains("template_messages")) ctx["messages"] = j["template_messages"];
  if (j.contains("kwargs") && j["kwargs"].is_object())
    for (const auto& [k, v] : j["kwargs"].items()) ctx[k] = v;
  return from_json(ctx);
}

Result<std::tm> parse_iso_time(std::string_view text) {
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  const std::string s(text);
  const int n = std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d", &year, &month, &day, &hour, &minute, &second);
  if (n < 3 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return make_error("invalid time '" + s + "': expected YYYY-MM-DDTHH:MM:SS");
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  // Fill in the weekday and day of the year (%a, %A, %j) without a time zone.
  std::tm copy = tm;
  const time_t t = timegm(&copy);
  std::tm filled{};
  gmtime_r(&t, &filled);
  tm.tm_wday = filled.tm_wday;
  tm.tm_yday = filled.tm_yday;
  return tm;
}

}  // namespace gb
