// Jinja parser (see jinja_parser.h).
#include "template/jinja_parser.h"

#include <initializer_list>
#include <string>

#include "template/jinja_lexer.h"

namespace gb::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Template parse() {
    Template t;
    std::string stop;
    t.body = parse_body({}, &stop);
    return t;
  }

 private:
  // --- token helpers -------------------------------------------------------
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  bool at_name(std::string_view kw) const { return cur().type == Tok::Name && cur().text == kw; }
  bool at_op(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
  const Token& advance() { return toks_[i_ < toks_.size() - 1 ? i_++ : i_]; }
  [[noreturn]] void fail(const std::string& msg) const { fail_at(msg, cur().pos); }
  [[noreturn]] static void fail_at(const std::string& msg, SourcePos pos) {
    throw TemplateError(ErrorKind::Syntax, msg, pos);
  }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::Eof: return "end of template";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::VarEnd: return "end of print statement";
      case Tok::String: return "string";
      case Tok::Data: return "template data";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!at_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
    advance();
  }
  void expect_name(std::string_view kw) {
    if (!at_name(kw)) fail("expected '" + std::string(kw) + "', got " + describe(cur()));
    advance();
  }
  std::string expect_identifier() {
    if (cur().type != Tok::Name) fail("expected a name, got " + describe(cur()));
    return advance().text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail("expected end of statement block, got " + describe(cur()));
    advance();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.fail("template nesting is deeper than " + std::to_string(kMaxNesting));
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  static ExprPtr make(ExprKind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  static StmtPtr make_stmt(StmtKind kind, SourcePos pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = pos;
    return s;
  }

  // --- statements ----------------------------------------------------------
  Body parse_body(std::initializer_list<std::string_view> stops, std::string* stopped_by);
  StmtPtr parse_statement();
  StmtPtr parse_if(SourcePos pos);
  StmtPtr parse_for(SourcePos pos);
  StmtPtr parse_set(SourcePos pos);
  StmtPtr parse_macro(SourcePos pos);
  StmtPtr parse_call_block(SourcePos pos);
  StmtPtr parse_filter_block(SourcePos pos);
  StmtPtr parse_with(SourcePos pos, bool generation);
  std::vector<std::string> parse_targets(bool* unpack);
  std::vector<MacroParam> parse_params();
  Body parse_until_end(std::string_view end_tag) {
    std::string stop;
    Body body = parse_body({end_tag}, &stop);
    advance();  // the end keyword
    expect_block_end();
    return body;
  }

  // --- expressions ---------------------------------------------------------
  ExprPtr parse_tuple_expression();
  ExprPtr parse_expression();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_args(CallArgList& args);
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b, SourcePos pos) {
    auto e = make(ExprKind::Binary, pos);
    e->name = std::move(op);
    e->operands.push_back(std::move(a));
    e->operands.push_back(std::move(b));
    return e;
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
};

Body Parser::parse_body(std::initializer_list<std::string_view> stops, std::string* stopped_by) {
  DepthGuard guard(*this);
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == Tok::Eof) {
      if (stops.size() == 0) return body;
      std::string want;
      for (auto s : stops) want += (want.empty() ? "'" : " or '") + std::string(s) + "'";
      fail("unexpected end of template, expected " + want);
    }
    if (t.type == Tok::Data) {
      auto s = make_stmt(StmtKind::Text, t.pos);
      s->text = t.text;
      body.push_back(std::move(s));
      advance();
    } else if (t.type == Tok::VarBegin) {
      auto s = make_stmt(StmtKind::Print, t.pos);
      advance();
      s->expr = parse_tuple_expression();
      if (cur().type != Tok::VarEnd) fail("expected end of print statement, got " + describe(cur()));
      advance();
      body.push_back(std::move(s));
    } else if (t.type == Tok::BlockBegin) {
      const Token& kw = peek();
      if (kw.type == Tok::Name) {
        for (auto s : stops) {
          if (kw.text == s) {
            advance();  // leave the keyword for the caller
            *stopped_by = kw.text;
            return body;
          }
        }
      }
      advance();
      body.push_back(parse_statement());
    } else {
      fail("unexpected " + describe(t));
    }
  }
}

StmtPtr Parser::parse_statement() {
  const Token kw = cur();
  if (kw.type != Tok::Name) fail("expected a statement name, got " + describe(kw));
  advance();
  const std::string& k = kw.text;
  if (k == "if") return parse_if(kw.pos);
  if (k == "for") return parse_for(kw.pos);
  if (k == "set") return parse_set(kw.pos);
  if (k == "macro") return parse_macro(kw.pos);
  if (k == "call") return parse_call_block(kw.pos);
  if (k == "filter") return parse_filter_block(kw.pos);
  if (k == "with") return parse_with(kw.pos, false);
  if (k == "generation") return parse_with(kw.pos, true);
  if (k == "break" || k == "continue") {
    expect_block_end();
    return make_stmt(k == "break" ? StmtKind::Break : StmtKind::Continue, kw.pos);
  }
  if (k == "include" || k == "import" || k == "from" || k == "extends" || k == "block")
    fail_at("'" + k + "' is not supported: templates cannot read other files", kw.pos);
  fail_at("unknown tag '" + k + "'", kw.pos);
}

StmtPtr Parser::parse_if(SourcePos pos) {
  auto s = make_stmt(StmtKind::If, pos);
  s->conditions.push_back(parse_tuple_expression());
  expect_block_end();
  while (true) {
    std::string stop;
    s->bodies.push_back(parse_body({"elif", "else", "endif"}, &stop));
    advance();
    if (stop == "elif") {
      s->conditions.push_back(parse_tuple_expression());
      expect_block_end();
    } else if (stop == "else") {
      expect_block_end();
      s->bodies.push_back(parse_until_end("endif"));
      return s;
    } else {
      expect_block_end();
      return s;
    }
  }
}

std::vector<std::string> Parser::parse_targets(bool* unpack) {
  std::vector<std::string> names;
  const bool paren = at_op("(");
  if (paren) advance();
  names.push_back(expect_identifier());
  while (at_op(",")) {
    advance();
    if (cur().type != Tok::Name || at_name("in")) break;
    names.push_back(expect_identifier());
  }
  if (paren) expect_op(")");
  *unpack = paren || names.size() > 1;
  return names;
}

StmtPtr Parser::parse_for(SourcePos pos) {
  auto s = make_stmt(StmtKind::For, pos);
  s->targets = parse_targets(&s->unpack);
  expect_name("in");
  // The iterable takes no inline `if`: that keyword starts the loop filter.
  s->expr = parse_or();
  if (at_op(",")) {
    auto tuple = make(ExprKind::TupleLit, s->expr->pos);
    tuple->operands.push_back(std::move(s->expr));
    while (at_op(",")) {
      advance();
      tuple->operands.push_back(parse_or());
    }
    s->expr = std::move(tuple);
  }
  if (at_name("if")) {
    advance();
    s->filter = parse_expression();
  }
  if (at_name("recursive")) fail("recursive loops are not supported");
  expect_block_end();
  std::string stop;
  s->bodies.push_back(parse_body({"else", "endfor"}, &stop));
  advance();
  expect_block_end();
  if (stop == "else") s->bodies.push_back(parse_until_end("endfor"));
  return s;
}

StmtPtr Parser::parse_set(SourcePos pos) {
  bool unpack = false;
  std::vector<std::string> targets = parse_targets(&unpack);
  std::string attr;
  if (!unpack && at_op(".")) {
    advance();
    attr = expect_identifier();
  }
  if (at_op("=")) {
    advance();
    auto s = make_stmt(StmtKind::Set, pos);
    s->targets = std::move(targets);
    s->unpack = unpack;
    s->text = attr;
    s->expr = parse_tuple_expression();
    expect_block_end();
    return s;
  }
  if (unpack || !attr.empty()) fail("expected '=' after a set target");
  auto s = make_stmt(StmtKind::SetBlock, pos);
  s->text = targets[0];
  if (at_op("|")) s->expr = parse_filter_expr(nullptr);
  expect_block_end();
  s->bodies.push_back(parse_until_end("endset"));
  return s;
}

std::vector<MacroParam> Parser::parse_params() {
  std::vector<MacroParam> params;
  expect_op("(");
  while (!at_op(")")) {
    if (!params.empty()) expect_op(",");
    if (at_op(")")) break;
    MacroParam p;
    p.name = expect_identifier();
    if (at_op("=")) {
      advance();
      p.default_value = parse_expression();
    }
    params.push_back(std::move(p));
  }
  advance();
  return params;
}

StmtPtr Parser::parse_macro(SourcePos pos) {
  auto s = make_stmt(StmtKind::Macro, pos);
  s->text = expect_identifier();
  s->params = parse_params();
  expect_block_end();
  s->bodies.push_back(parse_until_end("endmacro"));
  return s;
}

StmtPtr Parser::parse_call_block(SourcePos pos) {
  auto s = make_stmt(StmtKind::CallBlock, pos);
  if (at_op("(")) s->params = parse_params();
  s->expr = parse_expression();
  if (s->expr->kind != ExprKind::Call) fail_at("expected a macro call after 'call'", s->expr->pos);
  expect_block_end();
  s->bodies.push_back(parse_until_end("endcall"));
  return s;
}

StmtPtr Parser::parse_filter_block(SourcePos pos) {
  auto s = make_stmt(StmtKind::FilterBlock, pos);
  // `{% filter upper | trim %}`: a filter chain applied to the rendered body.
  s->expr = parse_filter(nullptr);
  while (at_op("|")) s->expr = parse_filter(std::move(s->expr));
  expect_block_end();
  s->bodies.push_back(parse_until_end("endfilter"));
  return s;
}

StmtPtr Parser::parse_with(SourcePos pos, bool generation) {
  auto s = make_stmt(StmtKind::With, pos);
  while (!generation && cur().type != Tok::BlockEnd) {
    if (!s->targets.empty()) expect_op(",");
    s->targets.push_back(expect_identifier());
    expect_op("=");
    s->values.push_back(parse_expression());
  }
  expect_block_end();
  s->bodies.push_back(parse_until_end(generation ? "endgeneration" : "endwith"));
  return s;
}

// --- expressions -----------------------------------------------------------

ExprPtr Parser::parse_tuple_expression() {
  ExprPtr first = parse_expression();
  if (!at_op(",")) return first;
  auto tuple = make(ExprKind::TupleLit, first->pos);
  tuple->operands.push_back(std::move(first));
  while (at_op(",")) {
    advance();
    if (cur().type == Tok::BlockEnd || cur().type == Tok::VarEnd) break;
    tuple->operands.push_back(parse_expression());
  }
  return tuple;
}

ExprPtr Parser::parse_expression() {
  DepthGuard guard(*this);
  ExprPtr node = parse_or();
  while (at_name("if")) {
    const SourcePos pos = cur().pos;
    advance();
    auto cond = make(ExprKind::Conditional, pos);
    cond->operands.push_back(std::move(node));
    cond->operands.push_back(parse_or());
    if (at_name("else")) {
      advance();
      cond->operands.push_back(parse_expression());
    } else {
      cond->operands.push_back(nullptr);
    }
    node = std::move(cond);
  }
  return node;
}

ExprPtr Parser::parse_or() {
  ExprPtr node = parse_and();
  while (at_name("or")) {
    const SourcePos pos = advance().pos;
    node = binary("or", std::move(node), parse_and(), pos);
  }
  return node;
}

ExprPtr Parser::parse_and() {
  ExprPtr node = parse_not();
  while (at_name("and")) {
    const SourcePos pos = advance().pos;
    node = binary("and", std::move(node), parse_not(), pos);
  }
  return node;
}

ExprPtr Parser::parse_not() {
  if (at_name("not")) {
    DepthGuard guard(*this);
    auto e = make(ExprKind::Unary, advance().pos);
    e->name = "not";
    e->operands.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    const SourcePos pos = cur().pos;
    if (cur().type == Tok::Op && (at_op("==") || at_op("!=") || at_op("<") || at_op("<=") || at_op(">") || at_op(">="))) {
      op = advance().text;
    } else if (at_name("in")) {
      advance();
      op = "in";
    } else if (at_name("not") && peek().type == Tok::Name && peek().text == "in") {
      advance();
      advance();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(ExprKind::Compare, pos);
      cmp->operands.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->operands.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr node = parse_concat();
  while (at_op("+") || at_op("-")) {
    const Token& t = advance();
    node = binary(t.text, std::move(node), parse_concat(), t.pos);
  }
  return node;
}

ExprPtr Parser::parse_concat() {
  ExprPtr node = parse_math2();
  while (at_op("~")) {
    const SourcePos pos = advance().pos;
    node = binary("~", std::move(node), parse_math2(), pos);
  }
  return node;
}

ExprPtr Parser::parse_math2() {
  ExprPtr node = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const Token& t = advance();
    node = binary(t.text, std::move(node), parse_pow(), t.pos);
  }
  return node;
}

ExprPtr Parser::parse_pow() {
  ExprPtr node = parse_unary(true);
  while (at_op("**")) {
    const SourcePos pos = advance().pos;
    node = binary("**", std::move(node), parse_unary(true), pos);
  }
  return node;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    const Token& t = advance();
    node = make(ExprKind::Unary, t.pos);
    node->name = t.text;
    node->operands.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  return with_filter ? parse_filter_expr(std::move(node)) : std::move(node);
}

ExprPtr Parser::parse_primary() {
  const Token t = cur();
  switch (t.type) {
    case Tok::Name: {
      advance();
      auto e = make(ExprKind::Literal, t.pos);
      if (t.text == "true" || t.text == "True") e->literal = Value::from_bool(true);
      else if (t.text == "false" || t.text == "False") e->literal = Value::from_bool(false);
      else if (t.text == "none" || t.text == "None") e->literal = Value::none();
      else {
        e->kind = ExprKind::Name;
        e->name = t.text;
      }
      return e;
    }
    case Tok::String: {
      std::string s;
      while (cur().type == Tok::String) s += advance().text;  // adjacent literals join
      auto e = make(ExprKind::Literal, t.pos);
      e->literal = Value::from_string(std::move(s));
      return e;
    }
    case Tok::Int:
    case Tok::Float: {
      advance();
      auto e = make(ExprKind::Literal, t.pos);
      e->literal = t.type == Tok::Int ? Value::from_int(t.int_value) : Value::from_float(t.float_value);
      return e;
    }
    case Tok::Op: break;
    default: fail("unexpected " + describe(t));
  }
  if (t.text == "(") {
    advance();
    if (at_op(")")) {
      advance();
      return make(ExprKind::TupleLit, t.pos);
    }
    ExprPtr inner = parse_expression();
    if (!at_op(",")) {
      expect_op(")");
      return inner;
    }
    auto tuple = make(ExprKind::TupleLit, t.pos);
    tuple->operands.push_back(std::move(inner));
    while (at_op(",")) {
      advance();
      if (at_op(")")) break;
      tuple->operands.push_back(parse_expression());
    }
    expect_op(")");
    return tuple;
  }
  if (t.text == "[" || t.text == "{") {
    const bool is_list = t.text == "[";
    advance();
    auto e = make(is_list ? ExprKind::ListLit : ExprKind::DictLit, t.pos);
    const std::string_view close = is_list ? "]" : "}";
    while (!at_op(close)) {
      if (!e->operands.empty()) {
        expect_op(",");
        if (at_op(close)) break;
      }
      e->operands.push_back(parse_expression());
      if (!is_list) {
        expect_op(":");
        e->operands.push_back(parse_expression());
      }
    }
    advance();
    return e;
  }
  fail("unexpected " + describe(t));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".")) {
      const SourcePos pos = advance().pos;
      if (cur().type == Tok::Int) {
        auto e = make(ExprKind::GetItem, pos);
        auto key = make(ExprKind::Literal, cur().pos);
        key->literal = Value::from_int(advance().int_value);
        e->operands.push_back(std::move(node));
        e->operands.push_back(std::move(key));
        node = std::move(e);
        continue;
      }
      auto e = make(ExprKind::GetAttr, pos);
      e->name = expect_identifier();
      e->operands.push_back(std::move(node));
      node = std::move(e);
    } else if (at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      auto e = make(ExprKind::Call, cur().pos);
      e->operands.push_back(std::move(node));
      parse_call_args(e->args);
      node = std::move(e);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const SourcePos pos = advance().pos;  // '['
  ExprPtr start;
  if (!at_op(":")) start = parse_expression();
  if (at_op("]")) {
    advance();
    if (!start) fail_at("empty subscript", pos);
    auto e = make(ExprKind::GetItem, pos);
    e->operands.push_back(std::move(node));
    e->operands.push_back(std::move(start));
    return e;
  }
  expect_op(":");
  auto e = make(ExprKind::Slice, pos);
  e->operands.push_back(std::move(node));
  e->operands.push_back(std::move(start));
  e->operands.push_back(at_op("]") || at_op(":") ? nullptr : parse_expression());
  ExprPtr step;
  if (at_op(":")) {
    advance();
    if (!at_op("]")) step = parse_expression();
  }
  e->operands.push_back(std::move(step));
  expect_op("]");
  return e;
}

void Parser::parse_call_args(CallArgList& args) {
  expect_op("(");
  bool first = true;
  while (!at_op(")")) {
    if (!first) {
      expect_op(",");
      if (at_op(")")) break;
    }
    first = false;
    if (at_op("*")) {
      advance();
      args.star = parse_expression();
    } else if (at_op("**")) {
      advance();
      args.star_star = parse_expression();
    } else if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
      std::string key = advance().text;
      advance();
      args.keyword.emplace_back(std::move(key), parse_expression());
    } else {
      if (!args.keyword.empty()) fail("positional argument follows keyword argument");
      args.positional.push_back(parse_expression());
    }
  }
  advance();
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op("|")) node = parse_filter(std::move(node));
    else if (at_name("is")) node = parse_test(std::move(node));
    else if (at_op("(") && node) {
      auto e = make(ExprKind::Call, cur().pos);
      e->operands.push_back(std::move(node));
      parse_call_args(e->args);
      node = std::move(e);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter(ExprPtr node) {
  if (node || at_op("|")) expect_op("|");
  auto e = make(ExprKind::Filter, cur().pos);
  e->name = expect_identifier();
  while (at_op(".")) {
    advance();
    e->name += "." + expect_identifier();
  }
  e->operands.push_back(std::move(node));
  if (at_op("(")) parse_call_args(e->args);
  return e;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const SourcePos pos = advance().pos;  // 'is'
  auto e = make(ExprKind::Test, pos);
  if (at_name("not")) {
    advance();
    e->negated = true;
  }
  e->name = expect_identifier();
  e->operands.push_back(std::move(node));
  if (at_op("(")) {
    parse_call_args(e->args);
  } else {
    const Token& t = cur();
    static constexpr std::string_view kStop[] = {"else", "or", "and", "if", "is", "in", "not", "recursive"};
    bool starts = t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float ||
                  (t.type == Tok::Op && (t.text == "[" || t.text == "{"));
    if (t.type == Tok::Name) {
      starts = true;
      for (auto s : kStop)
        if (t.text == s) starts = false;
    }
    if (starts) e->args.positional.push_back(parse_postfix(parse_primary()));
  }
  return e;
}

}  // namespace

Template parse_template(std::string_view source) { return Parser(lex_template(source)).parse(); }

}  // namespace gb::jinja
