// Jinja lexer (see jinja_lexer.h).
#include "template/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "template/jinja_value.h"

namespace gb::jinja {

SourceMap::SourceMap(std::string_view source) : source_(source) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < source.size(); ++i)
    if (source[i] == '\n') line_starts_.push_back(i + 1);
}

SourcePos SourceMap::at(size_t offset) const {
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  const size_t line = static_cast<size_t>(it - line_starts_.begin());
  const size_t start = line_starts_[line - 1];
  const auto column = num_code_points(source_.substr(start, offset - start)) + 1;
  return SourcePos{static_cast<int>(line), static_cast<int>(column)};
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

void rstrip_all(std::string& s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
}

// lstrip_blocks: drop spaces/tabs between the last line start and the tag.
void lstrip_line(std::string& data, bool data_starts_line) {
  const size_t nl = data.rfind('\n');
  const size_t from = nl == std::string::npos ? 0 : nl + 1;
  if (from == 0 && !data_starts_line) return;
  for (size_t i = from; i < data.size(); ++i)
    if (!is_space(data[i])) return;
  data.resize(from);
}

// Python string-literal escapes as Jinja2 decodes them ("unicode-escape").
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src), map_(src) {}
  std::vector<Token> run();

 private:
  [[noreturn]] void fail(const std::string& msg, size_t offset) const {
    throw TemplateError(ErrorKind::Syntax, msg, map_.at(offset));
  }
  void emit(Tok type, std::string text, size_t offset) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.pos = map_.at(offset);
    tokens_.push_back(std::move(t));
  }
  bool starts_line(size_t offset) const { return offset == 0 || src_[offset - 1] == '\n'; }
  size_t skip_after_end(size_t pos, bool strip, bool trim);
  size_t lex_comment(size_t start);
  size_t lex_raw(size_t body_start);
  size_t lex_tag(size_t start, bool block);
  size_t lex_string(size_t pos);
  size_t lex_number(size_t pos);
  bool raw_tag_at(size_t start, size_t* after) const;

  std::string_view src_;
  SourceMap map_;
  std::vector<Token> tokens_;
};

size_t Lexer::skip_after_end(size_t pos, bool strip, bool trim) {
  if (strip) {
    while (pos < src_.size() && is_space(src_[pos])) ++pos;
  } else if (trim && pos < src_.size() && src_[pos] == '\n') {
    ++pos;
  }
  return pos;
}

size_t Lexer::lex_comment(size_t start) {
  const size_t end = src_.find("#}", start + 2);
  if (end == std::string_view::npos) fail("unterminated comment: missing '#}'", start);
  const bool strip = end > start + 2 && src_[end - 1] == '-';
  return skip_after_end(end + 2, strip, true);
}

// `{% raw %}` / `{%- raw -%}`: on success *after = the offset past the tag.
bool Lexer::raw_tag_at(size_t start, size_t* after) const {
  size_t p = start + 2;
  if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
  while (p < src_.size() && is_space(src_[p])) ++p;
  if (src_.substr(p, 3) != "raw") return false;
  p += 3;
  while (p < src_.size() && is_space(src_[p])) ++p;
  bool strip = false;
  if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) {
    strip = src_[p] == '-';
    ++p;
  }
  if (src_.substr(p, 2) != "%}") return false;
  *after = const_cast<Lexer*>(this)->skip_after_end(p + 2, strip, true);
  return true;
}

size_t Lexer::lex_raw(size_t body_start) {
  for (size_t p = src_.find("{%", body_start); p != std::string_view::npos; p = src_.find("{%", p + 2)) {
    size_t q = p + 2;
    char sign = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
    while (q < src_.size() && is_space(src_[q])) ++q;
    if (src_.substr(q, 6) != "endraw") continue;
    q += 6;
    while (q < src_.size() && is_space(src_[q])) ++q;
    bool strip = false;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) strip = src_[q++] == '-';
    if (src_.substr(q, 2) != "%}") continue;
    std::string data(src_.substr(body_start, p - body_start));
    if (sign == '-') rstrip_all(data);
    else if (sign != '+') lstrip_line(data, starts_line(body_start));
    if (!data.empty()) emit(Tok::Data, std::move(data), body_start);
    return skip_after_end(q + 2, strip, true);
  }
  fail("unterminated raw block: missing '{% endraw %}'", body_start);
}

size_t Lexer::lex_string(size_t pos) {
  const char quote = src_[pos];
  std::string out;
  size_t p = pos + 1;
  while (p < src_.size() && src_[p] != quote) {
    char c = src_[p];
    if (c != '\\' || p + 1 >= src_.size()) {
      out += c;
      ++p;
      continue;
    }
    const char e = src_[p + 1];
    p += 2;
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;  // line continuation
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (p + n > src_.size()) fail("truncated \\" + std::string(1, e) + " escape", p - 2);
        const std::string hex(src_.substr(p, n));
        if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
          fail("invalid \\" + std::string(1, e) + " escape", p - 2);
        append_utf8(out, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
        p += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i)
            v = v * 8 + static_cast<uint32_t>(src_[p++] - '0');
          append_utf8(out, v);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  if (p >= src_.size()) fail("unterminated string literal", pos);
  emit(Tok::String, std::move(out), pos);
  return p + 1;
}

size_t Lexer::lex_number(size_t pos) {
  size_t p = pos;
  auto digits = [&] {
    while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
  };
  digits();
  bool is_float = false;
  if (p + 1 < src_.size() && src_[p] == '.' && std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
    is_float = true;
    ++p;
    digits();
  }
  if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
    size_t q = p + 1;
    if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
    if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
      is_float = true;
      p = q;
      digits();
    }
  }
  std::string text(src_.substr(pos, p - pos));
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  emit(is_float ? Tok::Float : Tok::Int, text, pos);
  try {
    if (is_float) tokens_.back().float_value = std::stod(text);
    else tokens_.back().int_value = std::stoll(text);
  } catch (const std::exception&) {
    fail("number out of range: " + text, pos);
  }
  return p;
}

size_t Lexer::lex_tag(size_t start, bool block) {
  emit(block ? Tok::BlockBegin : Tok::VarBegin, block ? "{%" : "{{", start);
  size_t p = start + 2;
  if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
  std::vector<char> open;  // brackets not yet closed
  static constexpr std::string_view kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
  while (true) {
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (p >= src_.size()) fail(block ? "unterminated tag: missing '%}'" : "unterminated tag: missing '}}'", start);
    if (open.empty()) {
      const std::string_view end = block ? "%}" : "}}";
      const char sign = src_[p];
      const bool signed_end = (sign == '-' || (block && sign == '+')) && src_.substr(p + 1, 2) == end;
      if (signed_end || src_.substr(p, 2) == end) {
        emit(block ? Tok::BlockEnd : Tok::VarEnd, std::string(end), p);
        const size_t after = p + (signed_end ? 3 : 2);
        return skip_after_end(after, signed_end && sign == '-', block && !(signed_end && sign == '+'));
      }
    }
    const char c = src_[p];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t q = p;
      while (q < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
      emit(Tok::Name, std::string(src_.substr(p, q - p)), p);
      p = q;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      p = lex_number(p);
    } else if (c == '\'' || c == '"') {
      p = lex_string(p);
    } else {
      std::string op(1, c);
      for (auto two : kOps2)
        if (src_.substr(p, 2) == two) op = std::string(two);
      if (op.size() == 1 && std::string_view("+-*/%~<>=.,:|()[]{}").find(c) == std::string_view::npos)
        fail(std::string("unexpected character '") + c + "'", p);
      if (c == '(' || c == '[' || c == '{') open.push_back(c);
      if (c == ')' || c == ']' || c == '}') {
        const char want = c == ')' ? '(' : c == ']' ? '[' : '{';
        if (open.empty() || open.back() != want) fail(std::string("unexpected '") + c + "'", p);
        open.pop_back();
      }
      emit(Tok::Op, op, p);
      p += op.size();
    }
  }
}

std::vector<Token> Lexer::run() {
  size_t pos = 0;
  while (pos < src_.size()) {
    size_t start = pos;
    char kind = 0;
    for (start = src_.find('{', pos); start != std::string_view::npos; start = src_.find('{', start + 1)) {
      if (start + 1 < src_.size() && (src_[start + 1] == '{' || src_[start + 1] == '%' || src_[start + 1] == '#')) {
        kind = src_[start + 1];
        break;
      }
    }
    if (start == std::string_view::npos) {
      emit(Tok::Data, std::string(src_.substr(pos)), pos);
      break;
    }
    std::string data(src_.substr(pos, start - pos));
    const char sign = start + 2 < src_.size() ? src_[start + 2] : 0;
    if (sign == '-') rstrip_all(data);
    else if (kind != '{' && sign != '+') lstrip_line(data, starts_line(pos));
    if (!data.empty()) emit(Tok::Data, std::move(data), pos);
    size_t raw_after = 0;
    if (kind == '#') pos = lex_comment(start);
    else if (kind == '%' && raw_tag_at(start, &raw_after)) pos = lex_raw(raw_after);
    else pos = lex_tag(start, kind == '%');
  }
  Token eof;
  eof.pos = map_.at(src_.size());
  tokens_.push_back(eof);
  return std::move(tokens_);
}

}  // namespace

std::vector<Token> lex_template(std::string_view source) { return Lexer(source).run(); }

}  // namespace gb::jinja
