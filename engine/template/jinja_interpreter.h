// Interpreter: renders a parsed Template against a context of variables, with
// Jinja2's semantics as transformers configures them (lenient undefined values,
// Python truthiness and str(), the loopcontrols extension) inside a sandbox:
//   - no file, process, network or clock access except strftime_now(), which reads
//     the fixed clock the caller passes;
//   - lists and dicts are immutable (no append/update/pop), like Jinja2's
//     ImmutableSandboxedEnvironment; only namespace() objects can be assigned to;
//   - limits on loop iterations (all loops together), call depth (macro recursion)
//     and output size, each a TemplateError(Limit) with line and column.
// Scopes follow Jinja2: a for loop, a macro call and a with block open a scope
// that `set` cannot leak out of; if/elif/else do not.
// Threads: one Interpreter renders one template at a time on the calling thread.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>

#include "template/jinja_ast.h"
#include "template/jinja_value.h"

namespace gb::jinja {

struct RenderLimits {
  int64_t max_loop_iterations = 1'000'000;  // over all loops of one render
  int max_call_depth = 100;                 // nested macro / caller() calls
  size_t max_output_bytes = 16u << 20;      // rendered text and every string built
};

// A variable scope. Lookups walk up the parents; assignments stay local.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent_scope = nullptr) : parent(std::move(parent_scope)) {}
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value v) { vars[name] = std::move(v); }
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

class Interpreter {
 public:
  // `now` is the local time strftime_now() formats.
  Interpreter(RenderLimits limits, std::tm now);

  // Renders `tpl` with the variables of `context` (a Dict). Throws TemplateError.
  std::string render(const Template& tpl, const Value& context);

  // Used by builtins (filters that apply tests or other filters, macros).
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, Value input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  const std::tm& now() const { return now_; }
  const RenderLimits& limits() const { return limits_; }
  // Throws a Limit error when `num_bytes` exceeds the output limit.
  void check_size(size_t num_bytes) const;
  void count_iteration();
  // Runs a macro body with its arguments bound (macro values call this).
  Value call_macro(const Stmt& s, const std::shared_ptr<Scope>& closure, CallArgs& args, const Value& caller);

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope);
  Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope, const std::string& name);
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);
  void write_out(const std::string& text);

  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_binary(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_slice(const Expr& e, const std::shared_ptr<Scope>& scope);
  CallArgs eval_args(const CallArgList& a, const std::shared_ptr<Scope>& scope);

  RenderLimits limits_;
  std::tm now_;
  std::string* out_ = nullptr;
  int64_t num_iterations_ = 0;
  int call_depth_ = 0;
};

// Arithmetic with Python's rules (int/float promotion, floor division and modulo,
// string and list concatenation and repetition). `op` is + - * / // % **.
Value binary_op(const std::string& op, const Value& a, const Value& b, size_t max_bytes);

}  // namespace gb::jinja
