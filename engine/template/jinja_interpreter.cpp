// Tree-walking interpreter for chat templates (see jinja_interpreter.h).
#include "template/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "template/jinja_builtins.h"

namespace gb::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::Interpreter(RenderLimits limits, std::tm now) : limits_(limits), now_(now) {}

void Interpreter::check_size(size_t num_bytes) const {
  if (num_bytes > limits_.max_output_bytes)
    throw TemplateError(ErrorKind::Limit,
                        "output limit reached: more than " + std::to_string(limits_.max_output_bytes) + " bytes",
                        {});
}

void Interpreter::count_iteration() {
  if (++num_iterations_ > limits_.max_loop_iterations)
    throw TemplateError(ErrorKind::Limit,
                        "loop limit reached: more than " + std::to_string(limits_.max_loop_iterations) +
                            " iterations",
                        {});
}

std::string Interpreter::render(const Template& tpl, const Value& context) {
  auto globals = std::make_shared<Scope>();
  install_globals(*globals);
  auto root = std::make_shared<Scope>(globals);
  if (context.is_dict())
    for (const auto& [k, v] : context.dict->entries) root->set(to_str(k), v);
  std::string out;
  out_ = &out;
  num_iterations_ = 0;
  call_depth_ = 0;
  exec_body(tpl.body, root);
  out_ = nullptr;
  return out;
}

void Interpreter::write_out(const std::string& text) {
  check_size(out_->size() + text.size());
  *out_ += text;
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec_body(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}


Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  try {
    switch (s.kind) {
      case StmtKind::Text: write_out(s.text); return Flow::Normal;
      case StmtKind::Print: write_out(to_str(eval(*s.expr, scope))); return Flow::Normal;
      case StmtKind::If:
        for (size_t i = 0; i < s.conditions.size(); ++i)
          if (truthy(eval(*s.conditions[i], scope))) return exec_body(s.bodies[i], scope);
        if (s.bodies.size() > s.conditions.size()) return exec_body(s.bodies.back(), scope);
        return Flow::Normal;
      case StmtKind::For: return exec_for(s, scope);
      case StmtKind::Set: exec_set(s, scope); return Flow::Normal;
      case StmtKind::SetBlock:
      case StmtKind::FilterBlock: {
        const bool is_set = s.kind == StmtKind::SetBlock;
        Value text = Value::from_string(capture(s.bodies[0], is_set ? scope : std::make_shared<Scope>(scope)));
        if (s.expr) {
          // The chain's innermost operand is empty: walk it from the inside out.
          std::vector<const Expr*> chain;
          for (const Expr* f = s.expr.get(); f != nullptr; f = f->operands[0].get()) chain.push_back(f);
          for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            CallArgs args = eval_args((*it)->args, scope);
            text = apply_filter((*it)->name, std::move(text), args);
          }
        }
        if (is_set) scope->set(s.text, std::move(text));
        else write_out(to_str(text));
        return Flow::Normal;
      }
      case StmtKind::Macro: scope->set(s.text, make_macro(s, scope, s.text)); return Flow::Normal;
      case StmtKind::CallBlock: {
        const Expr& call_expr = *s.expr;
        Value callee = eval(*call_expr.operands[0], scope);
        CallArgs args = eval_args(call_expr.args, scope);
        args.keyword.emplace_back("caller", make_macro(s, scope, "caller"));
        write_out(to_str(call(callee, args)));
        return Flow::Normal;
      }
      case StmtKind::With: {
        auto inner = std::make_shared<Scope>(scope);
        for (size_t i = 0; i < s.targets.size(); ++i) inner->set(s.targets[i], eval(*s.values[i], scope));
        return exec_body(s.bodies[0], inner);
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
    }
  } catch (TemplateError& e) {
    if (e.pos.line == 0) e.pos = s.pos;
    throw;
  } catch (const ValueError& e) {
    throw TemplateError(ErrorKind::Runtime, e.what(), s.pos);
  }
  return Flow::Normal;
}

namespace {
void bind_targets(Scope& scope, const Stmt& s, const Value& item) {
  if (!s.unpack) {
    scope.set(s.targets[0], item);
    return;
  }
  List parts = iterate(item);
  if (parts.size() != s.targets.size())
    throw ValueError(parts.size() < s.targets.size()
                         ? "not enough values to unpack (expected " + std::to_string(s.targets.size()) +
                               ", got " + std::to_string(parts.size()) + ")"
                         : "too many values to unpack (expected " + std::to_string(s.targets.size()) + ")");
  for (size_t i = 0; i < parts.size(); ++i) scope.set(s.targets[i], parts[i]);
}

Value make_loop(const List& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  Value loop = Value::new_dict();
  Dict& d = *loop.dict;
  d.set(Value::from_string("index"), Value::from_int(k + 1));
  d.set(Value::from_string("index0"), Value::from_int(k));
  d.set(Value::from_string("revindex"), Value::from_int(n - k));
  d.set(Value::from_string("revindex0"), Value::from_int(n - k - 1));
  d.set(Value::from_string("first"), Value::from_bool(k == 0));
  d.set(Value::from_string("last"), Value::from_bool(k == n - 1));
  d.set(Value::from_string("length"), Value::from_int(n));
  d.set(Value::from_string("depth"), Value::from_int(1));
  d.set(Value::from_string("depth0"), Value::from_int(0));
  if (i > 0) d.set(Value::from_string("previtem"), items[i - 1]);
  if (i + 1 < items.size()) d.set(Value::from_string("nextitem"), items[i + 1]);
  d.set(Value::from_string("cycle"), Value::function("cycle", [k](Interpreter&, CallArgs& a) {
          if (a.positional.empty()) throw ValueError("no items for cycling given");
          return a.positional[static_cast<size_t>(k) % a.positional.size()];
        }));
  return loop;
}
}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  List items;
  {
    Value iterable = eval(*s.expr, scope);
    try {
      items = iterate(iterable);
    } catch (const ValueError& e) {
      throw TemplateError(ErrorKind::Runtime, e.what(), s.expr->pos);
    }
  }
  auto loop_scope = std::make_shared<Scope>(scope);
  if (s.filter) {
    List kept;
    for (auto& item : items) {
      count_iteration();
      bind_targets(*loop_scope, s, item);
      if (truthy(eval(*s.filter, loop_scope))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return s.bodies.size() > 1 ? exec_body(s.bodies[1], scope) : Flow::Normal;
  for (size_t i = 0; i < items.size(); ++i) {
    count_iteration();
    bind_targets(*loop_scope, s, items[i]);
    loop_scope->set("loop", make_loop(items, i));
    if (exec_body(s.bodies[0], loop_scope) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  Value value = eval(*s.expr, scope);
  if (!s.text.empty()) {
    const Value* target = scope->find(s.targets[0]);
    if (target == nullptr || target->kind != Kind::Namespace)
      throw ValueError("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
    target->dict->set(Value::from_string(s.text), std::move(value));
    return;
  }
  bind_targets(*scope, s, value);
}

// A macro (or a call block's `caller`) closes over the scope it was defined in.
// It holds that scope weakly: scopes own their macros, so a strong reference
// would be a cycle.
Value Interpreter::make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope, const std::string& name) {
  std::weak_ptr<Scope> weak = scope;
  const Stmt* stmt = &s;
  return Value::function(
      name,
      [stmt, weak](Interpreter& in, CallArgs& args) {
        auto closure = weak.lock();
        if (!closure) throw ValueError("macro '" + stmt->text + "' was called after its scope ended");
        Value caller;
        for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
          if (it->first == "caller" && stmt->kind == StmtKind::Macro && it->second.kind == Kind::Callable &&
              it->second.callable->name == "caller") {
            caller = it->second;
            args.keyword.erase(it);
            break;
          }
        }
        return in.call_macro(*stmt, closure, args, caller);
      },
      true);
}

Value Interpreter::call_macro(const Stmt& s, const std::shared_ptr<Scope>& closure, CallArgs& args,
                              const Value& caller) {
  if (call_depth_ >= limits_.max_call_depth)
    throw TemplateError(ErrorKind::Limit,
                        "recursion limit reached: macro calls nested deeper than " +
                            std::to_string(limits_.max_call_depth),
                        {});
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& depth) : d(depth) { ++d; }
    ~DepthGuard() { --d; }
  } guard(call_depth_);
  auto scope = std::make_shared<Scope>(closure);
  for (size_t i = 0; i < s.params.size(); ++i) {
    const MacroParam& p = s.params[i];
    Value v = Value::undefined("parameter '" + p.name + "' was not provided");
    bool given = false;
    if (i < args.positional.size()) {
      v = args.positional[i];
      given = true;
    }
    for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
      if (it->first == p.name) {
        v = it->second;
        given = true;
        args.keyword.erase(it);
        break;
      }
    }
    if (!given && p.default_value) v = eval(*p.default_value, scope);
    scope->set(p.name, std::move(v));
  }
  List varargs;
  for (size_t i = s.params.size(); i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
  Value kwargs = Value::new_dict();
  for (auto& [k, v] : args.keyword) kwargs.dict->set(Value::from_string(k), v);
  scope->set("varargs", Value::from_list(std::move(varargs)));
  scope->set("kwargs", std::move(kwargs));
  if (caller.kind == Kind::Callable) scope->set("caller", caller);
  return Value::from_string(capture(s.bodies[0], scope));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.kind != Kind::Callable) throw ValueError("'" + type_name(callee) + "' object is not callable");
  return callee.callable->fn(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, Value input, CallArgs& args) {
  const FilterFn fn = find_filter(name);
  if (fn == nullptr) throw ValueError("no filter named '" + name + "'");
  return fn(*this, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  const TestFn fn = find_test(name);
  if (fn == nullptr) throw ValueError("no test named '" + name + "'");
  return fn(*this, input, args);
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::Undefined: fail_undefined(obj);
    case Kind::Namespace: {
      const Value* v = obj.dict->find(name);
      return v ? *v : Value::undefined("'Namespace' object has no attribute '" + name + "'");
    }
    case Kind::Dict: {
      Value m = bound_method(obj, name);
      if (!m.is_undefined() || !m.text.empty()) return m;
      const Value* v = obj.dict->find(name);
      return v ? *v : Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    default: {
      Value m = bound_method(obj, name);
      if (!m.is_undefined() || !m.text.empty()) return m;
      return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
    }
  }
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.kind == Kind::Dict || obj.kind == Kind::Namespace) {
    if (const Value* v = obj.dict->find(key)) return *v;
    if (key.is_string()) return get_attr(obj, key.text);
    return Value::undefined("'dict object' has no attribute " + repr(key));
  }
  if ((obj.is_list() || obj.is_string()) && key.is_integral()) {
    const int64_t n = length(obj);
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return Value::undefined("'" + type_name(obj) + " object' has no element " + std::to_string(key.as_int()));
    if (obj.is_list()) return (*obj.list)[static_cast<size_t>(i)];
    return Value::from_string(code_points(obj.text)[static_cast<size_t>(i)]);
  }
  if (key.is_string()) return get_attr(obj, key.text);
  return Value::undefined("'" + type_name(obj) + " object' has no element " + repr(key));
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  try {
    return eval_inner(e, scope);
  } catch (TemplateError& err) {
    if (err.pos.line == 0) err.pos = e.pos;
    throw;
  } catch (const ValueError& err) {
    throw TemplateError(ErrorKind::Runtime, err.what(), e.pos);
  }
}

CallArgs Interpreter::eval_args(const CallArgList& a, const std::shared_ptr<Scope>& scope) {
  CallArgs out;
  for (const auto& p : a.positional) out.positional.push_back(eval(*p, scope));
  if (a.star)
    for (auto& v : iterate(eval(*a.star, scope))) out.positional.push_back(std::move(v));
  for (const auto& [k, v] : a.keyword) out.keyword.emplace_back(k, eval(*v, scope));
  if (a.star_star) {
    Value d = eval(*a.star_star, scope);
    if (!d.is_dict()) throw ValueError("argument after ** must be a mapping, not " + type_name(d));
    for (const auto& [k, v] : d.dict->entries) out.keyword.emplace_back(to_str(k), v);
  }
  return out;
}

Value Interpreter::eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: {
      const Value* v = scope->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::GetAttr: return get_attr(eval(*e.operands[0], scope), e.name);
    case ExprKind::GetItem: return get_item(eval(*e.operands[0], scope), eval(*e.operands[1], scope));
    case ExprKind::Slice: return eval_slice(e, scope);
    case ExprKind::Call: {
      Value callee = eval(*e.operands[0], scope);
      CallArgs args = eval_args(e.args, scope);
      return call(callee, args);
    }
    case ExprKind::Filter: {
      Value input = e.operands[0] ? eval(*e.operands[0], scope) : Value::undefined();
      CallArgs args = eval_args(e.args, scope);
      return apply_filter(e.name, std::move(input), args);
    }
    case ExprKind::Test: {
      Value input = eval(*e.operands[0], scope);
      CallArgs args = eval_args(e.args, scope);
      return Value::from_bool(apply_test(e.name, input, args) != e.negated);
    }
    case ExprKind::Unary: {
      Value v = eval(*e.operands[0], scope);
      if (e.name == "not") return Value::from_bool(!truthy(v));
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) throw ValueError("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
      if (e.name == "+") return v.kind == Kind::Float ? v : Value::from_int(v.as_int());
      return v.kind == Kind::Float ? Value::from_float(-v.real) : Value::from_int(-v.as_int());
    }
    case ExprKind::Binary: return eval_binary(e, scope);
    case ExprKind::Compare: return eval_compare(e, scope);
    case ExprKind::Conditional:
      if (truthy(eval(*e.operands[1], scope))) return eval(*e.operands[0], scope);
      return e.operands[2] ? eval(*e.operands[2], scope) : Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    case ExprKind::ListLit:
    case ExprKind::TupleLit: {
      List items;
      for (const auto& op : e.operands) items.push_back(eval(*op, scope));
      return Value::from_list(std::move(items), e.kind == ExprKind::TupleLit);
    }
    case ExprKind::DictLit: {
      Value d = Value::new_dict();
      for (size_t i = 0; i + 1 < e.operands.size(); i += 2)
        d.dict->set(eval(*e.operands[i], scope), eval(*e.operands[i + 1], scope));
      return d;
    }
  }
  return Value::undefined();
}

Value Interpreter::eval_binary(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value a = eval(*e.operands[0], scope);
  if (e.name == "and") return truthy(a) ? eval(*e.operands[1], scope) : a;
  if (e.name == "or") return truthy(a) ? a : eval(*e.operands[1], scope);
  Value b = eval(*e.operands[1], scope);
  if (e.name == "~") {
    std::string s = to_str(a) + to_str(b);
    check_size(s.size());
    return Value::from_string(std::move(s));
  }
  return binary_op(e.name, a, b, limits_.max_output_bytes);
}

Value Interpreter::eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value left = eval(*e.operands[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.operands[i + 1], scope);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") ok = equals(left, right);
    else if (op == "!=") ok = !equals(left, right);
    else if (op == "in") ok = contains(right, left);
    else if (op == "notin") ok = !contains(right, left);
    else {
      const int c = compare(left, right);
      ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!ok) return Value::from_bool(false);
    left = std::move(right);
  }
  return Value::from_bool(true);
}

Value Interpreter::eval_slice(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value obj = eval(*e.operands[0], scope);
  if (obj.is_undefined()) fail_undefined(obj);
  if (!obj.is_list() && !obj.is_string()) throw ValueError("'" + type_name(obj) + "' object is not subscriptable");
  auto bound = [&](size_t i) -> std::optional<int64_t> {
    if (!e.operands[i]) return std::nullopt;
    Value v = eval(*e.operands[i], scope);
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_integral()) throw ValueError("slice indices must be integers or None");
    return v.as_int();
  };
  const std::optional<int64_t> start_arg = bound(1), stop_arg = bound(2), step_arg = bound(3);
  const int64_t step = step_arg.value_or(1);
  if (step == 0) throw ValueError("slice step cannot be zero");
  std::vector<std::string> chars;
  if (obj.is_string()) chars = code_points(obj.text);
  const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.list->size()) : static_cast<int64_t>(chars.size());
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = clamp(start_arg, step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(stop_arg, step > 0 ? n : -1);
  List items;
  std::string text;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is_list()) items.push_back((*obj.list)[static_cast<size_t>(i)]);
    else text += chars[static_cast<size_t>(i)];
  }
  return obj.is_list() ? Value::from_list(std::move(items), obj.is_tuple) : Value::from_string(std::move(text));
}

namespace {
[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw ValueError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

Value repeat(const Value& seq, int64_t times, size_t max_bytes) {
  const int64_t n = std::max<int64_t>(times, 0);
  if (seq.is_string()) {
    if (static_cast<double>(seq.text.size()) * static_cast<double>(n) > static_cast<double>(max_bytes))
      throw TemplateError(ErrorKind::Limit, "output limit reached: string repetition too large", {});
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.text;
    return Value::from_string(std::move(out));
  }
  if (static_cast<double>(seq.list->size()) * static_cast<double>(n) > static_cast<double>(max_bytes))
    throw TemplateError(ErrorKind::Limit, "output limit reached: list repetition too large", {});
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::from_list(std::move(out), seq.is_tuple);
}

Value int_op(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
  else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
  else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
  else if (op == "/") {
    if (y == 0) throw ValueError("division by zero");
    return Value::from_float(static_cast<double>(x) / static_cast<double>(y));
  } else if (op == "//" || op == "%") {
    if (y == 0) throw ValueError(op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      q -= 1;
      m += y;
    }
    return Value::from_int(op == "//" ? q : m);
  } else if (op == "**") {
    if (y < 0) return Value::from_float(std::pow(static_cast<double>(x), static_cast<double>(y)));
    r = 1;
    for (int64_t i = 0; i < y && !overflow; ++i) overflow = __builtin_mul_overflow(r, x, &r);
  }
  if (overflow) throw ValueError("integer overflow in '" + op + "'");
  return Value::from_int(r);
}

Value float_op(const std::string& op, double x, double y) {
  if (op == "+") return Value::from_float(x + y);
  if (op == "-") return Value::from_float(x - y);
  if (op == "*") return Value::from_float(x * y);
  if (op == "**") return Value::from_float(std::pow(x, y));
  if (y == 0.0) throw ValueError("float division by zero");
  if (op == "/") return Value::from_float(x / y);
  if (op == "//") return Value::from_float(std::floor(x / y));
  double m = std::fmod(x, y);
  if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
  return Value::from_float(m);
}
}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, size_t max_bytes) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return int_op(op, a.as_int(), b.as_int());
    return float_op(op, a.as_double(), b.as_double());
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.text.size() + b.text.size() > max_bytes)
        throw TemplateError(ErrorKind::Limit, "output limit reached: string too large", {});
      return Value::from_string(a.text + b.text);
    }
    if (a.is_string()) throw ValueError("can only concatenate str (not \"" + type_name(b) + "\") to str");
    if (a.is_list() && b.is_list() && a.is_tuple == b.is_tuple) {
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::from_list(std::move(out), a.is_tuple);
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && b.is_integral()) return repeat(a, b.as_int(), max_bytes);
    if ((b.is_string() || b.is_list()) && a.is_integral()) return repeat(b, a.as_int(), max_bytes);
  }
  unsupported(op, a, b);
}

}  // namespace gb::jinja
