#include "trace/trace_event.h"

#include "trace/trace_fields.h"

namespace gb {

const char* token_origin_name(TokenOrigin origin) {
  switch (origin) {
    case TokenOrigin::Plain: return "plain";
    case TokenOrigin::Accepted: return "accepted";
    case TokenOrigin::Resampled: return "resampled";
    case TokenOrigin::Bonus: return "bonus";
    case TokenOrigin::Forced: return "forced";
  }
  return "?";
}

const char* trace_event_type(const TraceEventBody& body) {
  // The names are null-terminated literals, so data() is a C string.
  return std::visit([](const auto& e) { return trace_fields::FieldsOf<std::decay_t<decltype(e)>>::type.data(); },
                    body);
}

}  // namespace gb
