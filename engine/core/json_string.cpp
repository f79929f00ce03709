#include "core/json_string.h"

#include <cstdint>
#include <cstdio>

namespace gb {

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && (c < 0x80 || !ensure_ascii)) continue;
    out.append(s, run, i - run);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
        } else {
          // ensure_ascii: decode one code point (a UTF-8 lead byte and its continuation bytes).
          const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
          uint32_t cp = n == 1 ? c : c & (0xFFu >> (n + 1));
          for (size_t k = 1; k < n && i + k < s.size(); ++k)
            cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
          i = i + n - 1 < s.size() ? i + n - 1 : s.size() - 1;  // a sequence cut short ends the text
          if (cp >= 0x10000) {
            cp -= 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          }
        }
        out += buf;
    }
    run = i + 1;
  }
  out.append(s, run, s.size() - run);
  out += '"';
}

}  // namespace gb
