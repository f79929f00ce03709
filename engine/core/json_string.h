// A JSON string literal (quotes included) appended to `out`: the two-character
// escapes (\" \\ \b \f \n \r \t), other control characters as \u00xx, every
// other byte as it is, or with ensure_ascii every non-ASCII code point as
// \uXXXX (a surrogate pair above U+FFFF), as Python's json.dumps writes them.
// The bytes are copied through unchecked: a caller that may hold text that is
// not UTF-8 decides what to do with it first. Used by the trace writer (the
// same bytes as nlohmann's dump) and the templates' tojson filter.
#pragma once

#include <string>
#include <string_view>

namespace gb {

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii = false);

}  // namespace gb
