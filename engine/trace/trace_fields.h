// The one list of every trace event's fields. Each event type (and the nested
// KvEvent, TokenRecord and CandidateRecord) has a FieldsOf<T> specialisation: its
// JSON type name and a tuple of (JSON key, member pointer, form). The JSON writer
// (trace_json.cpp), the reader (trace_json_parse.cpp), equality
// (trace_event_compare.cpp), the strict schema (trace_schema.cpp) and the UI
// mirror's completeness check (ui/bridge/engine_event_mirror.h) all walk these
// tuples. Adding a field: the struct member, its entry here, its UI mirror entry
// (or a `skip`), and docs/trace-format.md (the contract). The checks below hold
// each list to its struct's member count, and the UI mirror's to the list, so a
// forgotten entry does not compile.
//
// How a member's C++ type maps to JSON (docs/trace-format.md, "Encoding rules"):
//   int32_t, BlockId -> i32; int64_t -> int; uint64_t, RequestId -> uint;
//   float, double -> real; bool; std::string -> string (Form::Text: text with
//   `<key>_hex`); an enum with EnumInfo -> its name; std::optional<X> -> X or null;
//   std::vector<X> -> array; a struct with FieldsOf -> object.
//   Form::Hash: uint64_t as 16 hex digits. Form::NoRequestIsNull: a RequestId whose
//   kNoRequest value is written as null.
//   Inline{&T::member}: the member's own fields appear at this level (KvTraceEvent's
//   `kv`), so the JSON stays flat.
// Order in each list is the reader's order (the first problem found is reported);
// the writer's key order is nlohmann's (sorted), so it does not depend on it.
// Threads: compile-time data only.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "trace/trace_event.h"

namespace gb {

// Member-type traits the generated writers, readers and schema dispatch on.
template <class T>
inline constexpr bool is_vector = false;
template <class T>
inline constexpr bool is_vector<std::vector<T>> = true;
template <class T>
inline constexpr bool is_optional = false;
template <class T>
inline constexpr bool is_optional<std::optional<T>> = true;
template <class T>
inline constexpr bool is_enum_vector = false;
template <class T>
inline constexpr bool is_enum_vector<std::vector<T>> = std::is_enum_v<T>;

}  // namespace gb

namespace gb::trace_fields {

// How a member appears in JSON when its C++ type alone does not say.
// OmitWhenAbsent: an optional member written only when it holds a value, and
// read as absent when its key is missing (a field added after traces were
// written, e.g. a step's window-group counts).
enum class Form : uint8_t { Plain, Text, Hash, NoRequestIsNull, OmitWhenAbsent };

template <class Owner, class Member>
struct Field {
  using owner_type = Owner;
  using member_type = Member;
  std::string_view name;
  Member Owner::*ptr;
  Form form = Form::Plain;
  std::span<const std::string_view> allowed = {};  // strings: the documented values (empty: any)
};

// A member whose own FieldsOf list is spliced in at this level.
template <class Owner, class Member>
struct Inline {
  using owner_type = Owner;
  using member_type = Member;
  Member Owner::*ptr;
};

template <class O, class M>
constexpr Field<O, M> field(std::string_view name, M O::*ptr, Form form = Form::Plain) {
  return {name, ptr, form, {}};
}
template <class O, class M, size_t N>
constexpr Field<O, M> field(std::string_view name, M O::*ptr, const std::array<std::string_view, N>& allowed) {
  return {name, ptr, Form::Plain, std::span<const std::string_view>(allowed)};
}
template <class O, class M>
constexpr Inline<O, M> inline_fields(M O::*ptr) {
  return {ptr};
}

// Enums written by name: `count` enumerators 0..count-1, named by the enum's own
// name function (the one list of its names); `what` names the enum in error
// messages ("unknown token origin \"x\""). The static_asserts fail when an
// enumerator is added at the end without updating `count`.
template <class E>
struct EnumInfo;

template <>
struct EnumInfo<TokenOrigin> {
  static constexpr std::string_view what = "token origin";
  static constexpr size_t count = 5;
  static_assert(static_cast<size_t>(TokenOrigin::Forced) + 1 == count, "TokenOrigin changed: update count");
  static std::string_view name(TokenOrigin v) { return token_origin_name(v); }
};
template <>
struct EnumInfo<KvEventKind> {
  static constexpr std::string_view what = "KV event kind";
  static constexpr size_t count = 11;
  static_assert(static_cast<size_t>(KvEventKind::Lookahead) + 1 == count, "KvEventKind changed: update count");
  static std::string_view name(KvEventKind v) { return kv_event_kind_name(v); }
};
template <>
struct EnumInfo<SamplerStage> {
  static constexpr std::string_view what = "sampler stage";
  static constexpr size_t count = kNumSamplerStages;
  static_assert(static_cast<size_t>(SamplerStage::Grammar) + 1 == count, "SamplerStage changed: update count");
  static std::string_view name(SamplerStage v) { return sampler_stage_name(v); }
  // The reader has always accepted the aliases parse_sampler_stage knows ("temp").
  static std::optional<SamplerStage> parse(std::string_view name) {
    auto stage = parse_sampler_stage(name);
    return stage.ok() ? std::optional(stage.value()) : std::nullopt;
  }
};

// Every name of E, in enumerator order.
template <class E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (size_t i = 0; i < EnumInfo<E>::count; ++i) out.emplace_back(EnumInfo<E>::name(static_cast<E>(i)));
  return out;
}

template <class E>
std::optional<E> parse_enum(std::string_view name) {
  if constexpr (requires { EnumInfo<E>::parse(name); }) return EnumInfo<E>::parse(name);
  for (size_t i = 0; i < EnumInfo<E>::count; ++i)
    if (name == EnumInfo<E>::name(static_cast<E>(i))) return static_cast<E>(i);
  return std::nullopt;
}

template <class T>
struct FieldsOf;  // specialised below: `static constexpr auto list = std::tuple{...};`

inline constexpr std::array<std::string_view, 2> kPriorities = {"interactive", "batch"};
inline constexpr std::array<std::string_view, 6> kFinishReasons = {"stop",      "max_tokens", "length",
                                                                   "cancelled", "error",      "grammar_dead_end"};

template <>
struct FieldsOf<CandidateRecord> {
  using T = CandidateRecord;
  static constexpr auto list = std::tuple{field("id", &T::id), field("logit", &T::logit),
                                          field("prob_before", &T::prob_before),
                                          field("prob_after_stage", &T::prob_after_stage),
                                          field("removed_by_stage", &T::removed_by_stage)};
};

template <>
struct FieldsOf<GrammarRecord> {
  using T = GrammarRecord;
  static constexpr auto list = std::tuple{field("mass_allowed", &T::mass_allowed),
                                          field("num_allowed", &T::num_allowed), field("forced", &T::forced),
                                          field("state", &T::state)};
};

template <>
struct FieldsOf<RoutingRecord> {
  using T = RoutingRecord;
  static constexpr auto list = std::tuple{field("experts_per_token", &T::experts_per_token),
                                          field("experts", &T::experts), field("weights", &T::weights)};
};

template <>
struct FieldsOf<TokenRecord> {
  using T = TokenRecord;
  static constexpr auto list = std::tuple{
      field("stages", &T::stages),
      field("stage_active", &T::stage_active),
      field("num_candidates_after_stage", &T::num_candidates_after_stage),
      field("num_candidates_before", &T::num_candidates_before),
      field("top", &T::top),
      field("entropy_before", &T::entropy_before),
      field("entropy_after", &T::entropy_after),
      field("chosen", &T::chosen),
      field("chosen_logit", &T::chosen_logit),
      field("chosen_prob_before", &T::chosen_prob_before),
      field("chosen_prob", &T::chosen_prob),
      field("chosen_rank", &T::chosen_rank),
      field("rng_counter", &T::rng_counter),
      field("draw", &T::draw),
      field("xtc_draw", &T::xtc_draw),
      field("xtc_fired", &T::xtc_fired),
      field("grammar", &T::grammar, Form::OmitWhenAbsent),
      field("routing", &T::routing, Form::OmitWhenAbsent),
      field("forward_ms", &T::forward_ms),
      field("sample_ms", &T::sample_ms)};
};

template <>
struct FieldsOf<KvEvent> {
  using T = KvEvent;
  static constexpr auto list =
      std::tuple{field("kind", &T::kind),           field("block", &T::block),
                 field("request", &T::request, Form::NoRequestIsNull), field("other_block", &T::other_block),
                 field("ref_count", &T::ref_count), field("hash", &T::hash, Form::Hash)};
};

template <>
struct FieldsOf<RequestSubmittedEvent> {
  using T = RequestSubmittedEvent;
  static constexpr std::string_view type = "request_submitted";
  static constexpr auto list = std::tuple{field("request", &T::request),
                                          field("prompt_ids", &T::prompt_ids),
                                          field("max_tokens", &T::max_tokens),
                                          field("priority", &T::priority, kPriorities),
                                          field("sampler_settings", &T::sampler_settings, Form::Text),
                                          field("parent", &T::parent),
                                          field("fork_position", &T::fork_position),
                                          field("purpose", &T::purpose, Form::OmitWhenAbsent)};
};

template <>
struct FieldsOf<RequestAdmittedEvent> {
  using T = RequestAdmittedEvent;
  static constexpr std::string_view type = "request_admitted";
  static constexpr auto list = std::tuple{field("request", &T::request),
                                          field("num_cached_tokens", &T::num_cached_tokens),
                                          field("queue_ms", &T::queue_ms)};
};

template <>
struct FieldsOf<PrefillChunkEvent> {
  using T = PrefillChunkEvent;
  static constexpr std::string_view type = "prefill_chunk";
  static constexpr auto list = std::tuple{field("request", &T::request), field("step", &T::step),
                                          field("start_position", &T::start_position),
                                          field("num_tokens", &T::num_tokens)};
};

template <>
struct FieldsOf<TokenSampledEvent> {
  using T = TokenSampledEvent;
  static constexpr std::string_view type = "token_sampled";
  static constexpr auto list =
      std::tuple{field("request", &T::request), field("step", &T::step),       field("position", &T::position),
                 field("index", &T::index),     field("token", &T::token),     field("text", &T::text, Form::Text),
                 field("origin", &T::origin),   field("record", &T::record)};
};

template <>
struct FieldsOf<RequestPreemptedEvent> {
  using T = RequestPreemptedEvent;
  static constexpr std::string_view type = "request_preempted";
  static constexpr auto list = std::tuple{field("request", &T::request), field("step", &T::step)};
};

template <>
struct FieldsOf<RequestFinishedEvent> {
  using T = RequestFinishedEvent;
  static constexpr std::string_view type = "request_finished";
  static constexpr auto list = std::tuple{field("request", &T::request),
                                          field("reason", &T::reason, kFinishReasons),
                                          field("num_prompt_tokens", &T::num_prompt_tokens),
                                          field("num_generated", &T::num_generated),
                                          field("num_cached_tokens", &T::num_cached_tokens),
                                          field("ttft_ms", &T::ttft_ms),
                                          field("tpot_ms", &T::tpot_ms),
                                          field("e2e_ms", &T::e2e_ms),
                                          field("text", &T::text, Form::Text)};
};

template <>
struct FieldsOf<StepEvent> {
  using T = StepEvent;
  static constexpr std::string_view type = "step";
  static constexpr auto list = std::tuple{field("step", &T::step),
                                          field("start_ms", &T::start_ms),
                                          field("schedule_ms", &T::schedule_ms),
                                          field("forward_ms", &T::forward_ms),
                                          field("sample_ms", &T::sample_ms),
                                          field("num_seqs", &T::num_seqs),
                                          field("num_prefill_tokens", &T::num_prefill_tokens),
                                          field("num_decode_tokens", &T::num_decode_tokens),
                                          field("num_running", &T::num_running),
                                          field("num_waiting", &T::num_waiting),
                                          field("num_blocks_owned", &T::num_blocks_owned),
                                          field("num_blocks_free", &T::num_blocks_free),
                                          field("num_blocks_cached", &T::num_blocks_cached),
                                          field("num_blocks_total", &T::num_blocks_total),
                                          field("num_prefix_hit_tokens", &T::num_prefix_hit_tokens),
                                          field("num_preemptions", &T::num_preemptions),
                                          field("num_window_blocks_owned", &T::num_window_blocks_owned, Form::OmitWhenAbsent),
                                          field("num_window_blocks_cached", &T::num_window_blocks_cached, Form::OmitWhenAbsent),
                                          field("num_window_blocks_total", &T::num_window_blocks_total, Form::OmitWhenAbsent)};
};

template <>
struct FieldsOf<KvTraceEvent> {
  using T = KvTraceEvent;
  static constexpr std::string_view type = "kv";
  static constexpr auto list = std::tuple{field("step", &T::step), inline_fields(&T::kv)};
};

template <>
struct FieldsOf<SpeculativeEvent> {
  using T = SpeculativeEvent;
  static constexpr std::string_view type = "speculative";
  static constexpr auto list = std::tuple{field("request", &T::request),
                                          field("step", &T::step),
                                          field("drafter", &T::drafter),
                                          field("drafted", &T::drafted),
                                          field("q", &T::q),
                                          field("p", &T::p),
                                          field("num_accepted", &T::num_accepted),
                                          field("rejected", &T::rejected),
                                          field("next", &T::next),
                                          field("bonus", &T::bonus),
                                          field("draft_ms", &T::draft_ms),
                                          field("verify_ms", &T::verify_ms)};
};

template <>
struct FieldsOf<KvEvictionEvent> {
  using T = KvEvictionEvent;
  static constexpr std::string_view type = "kv_eviction";
  static constexpr auto list = std::tuple{field("request", &T::request),
                                          field("step", &T::step),
                                          field("policy", &T::policy),
                                          field("reason", &T::reason),
                                          field("positions", &T::positions),
                                          field("mass", &T::mass),
                                          field("num_kept", &T::num_kept),
                                          field("kept_positions", &T::kept_positions),
                                          field("kept_mass", &T::kept_mass)};
};

template <>
struct FieldsOf<KvShadowEvent> {
  using T = KvShadowEvent;
  static constexpr std::string_view type = "kv_shadow";
  static constexpr auto list = std::tuple{field("request", &T::request),
                                          field("shadow", &T::shadow),
                                          field("step", &T::step),
                                          field("position", &T::position),
                                          field("index", &T::index),
                                          field("kl", &T::kl),
                                          field("top1_agree", &T::top1_agree),
                                          field("logprob_pruned", &T::logprob_pruned),
                                          field("logprob_full", &T::logprob_full)};
};

template <>
struct FieldsOf<ErrorEvent> {
  using T = ErrorEvent;
  static constexpr std::string_view type = "error";
  static constexpr auto list = std::tuple{field("request", &T::request), field("message", &T::message, Form::Text)};
};

// ---- walking the lists ----------------------------------------------------

template <class T>
concept HasFields = requires { FieldsOf<T>::list; };

template <class T>
inline constexpr size_t num_fields = std::tuple_size_v<std::remove_cvref_t<decltype(FieldsOf<T>::list)>>;

// Calls fn(entry) for each Field / Inline of T's list, in order.
template <class T, class Fn>
constexpr void for_each_field(Fn&& fn) {
  std::apply([&](const auto&... entry) { (fn(entry), ...); }, FieldsOf<T>::list);
}

template <class Entry>
inline constexpr bool is_inline = false;
template <class O, class M>
inline constexpr bool is_inline<Inline<O, M>> = true;

// Calls fn(index, type) for each alternative of the variant, with `type` a
// std::type_identity of the alternative.
template <class Variant, class Fn>
constexpr void for_each_alternative(Fn&& fn) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    (fn(I, std::type_identity<std::variant_alternative_t<I, Variant>>{}), ...);
  }(std::make_index_sequence<std::variant_size_v<Variant>>{});
}

// ---- the member-count check ---------------------------------------------
// A structured binding must name exactly as many identifiers as the type has
// data members, so tie_members<num_fields<T>> fails to compile when the struct
// has a member its list lacks (or the other way round). Tests also use it to
// visit every member without the list (test_trace_fields.cpp).
#define GB_TRACE_FIELDS_TIE(N, ...)         \
  if constexpr (Count == N) {                \
    auto& [__VA_ARGS__] = value;             \
    return std::tie(__VA_ARGS__);            \
  } else
template <size_t Count, class T>
auto tie_members(T& value) {
  static_assert(Count >= 1 && Count <= 20, "extend tie_members for larger structs");
  GB_TRACE_FIELDS_TIE(1, a1)
  GB_TRACE_FIELDS_TIE(2, a1, a2)
  GB_TRACE_FIELDS_TIE(3, a1, a2, a3)
  GB_TRACE_FIELDS_TIE(4, a1, a2, a3, a4)
  GB_TRACE_FIELDS_TIE(5, a1, a2, a3, a4, a5)
  GB_TRACE_FIELDS_TIE(6, a1, a2, a3, a4, a5, a6)
  GB_TRACE_FIELDS_TIE(7, a1, a2, a3, a4, a5, a6, a7)
  GB_TRACE_FIELDS_TIE(8, a1, a2, a3, a4, a5, a6, a7, a8)
  GB_TRACE_FIELDS_TIE(9, a1, a2, a3, a4, a5, a6, a7, a8, a9)
  GB_TRACE_FIELDS_TIE(10, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)
  GB_TRACE_FIELDS_TIE(11, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)
  GB_TRACE_FIELDS_TIE(12, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)
  GB_TRACE_FIELDS_TIE(13, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)
  GB_TRACE_FIELDS_TIE(14, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)
  GB_TRACE_FIELDS_TIE(15, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)
  GB_TRACE_FIELDS_TIE(16, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16)
  GB_TRACE_FIELDS_TIE(17, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17)
  GB_TRACE_FIELDS_TIE(18, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18)
  GB_TRACE_FIELDS_TIE(19, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19)
  GB_TRACE_FIELDS_TIE(20, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
                      a20)
  {
    return std::tie(value);  // unreachable: the static_assert above fails first
  }
}
#undef GB_TRACE_FIELDS_TIE

// Every member of T, as a tuple of references (T's list must match T's members).
template <HasFields T>
auto members_of(T& value) {
  return tie_members<num_fields<T>>(value);
}

namespace detail {
// Every listed member belongs to T (an Inline counts as one member).
template <class T>
constexpr bool entries_belong() {
  bool ok = true;
  for_each_field<T>(
      [&](const auto& e) { ok = ok && std::is_same_v<typename std::remove_cvref_t<decltype(e)>::owner_type, T>; });
  return ok;
}

template <class T>
struct Checked {
  static_assert(entries_belong<T>(), "a FieldsOf list names a member of another type");
  static constexpr auto tie = &tie_members<num_fields<T>, T>;
};
}  // namespace detail

// Odr-using Checked<T>::tie instantiates the binding, so each struct and its list
// must have the same number of members. That each member is listed once (not one
// twice and another missing) is checked by test_trace_fields.cpp, which sets every
// member through the list and reads them back through members_of.
inline constexpr auto all_checked =
    std::tuple{detail::Checked<CandidateRecord>::tie,     detail::Checked<TokenRecord>::tie,
               detail::Checked<KvEvent>::tie,             detail::Checked<RequestSubmittedEvent>::tie,
               detail::Checked<RequestAdmittedEvent>::tie, detail::Checked<PrefillChunkEvent>::tie,
               detail::Checked<TokenSampledEvent>::tie,   detail::Checked<RequestPreemptedEvent>::tie,
               detail::Checked<RequestFinishedEvent>::tie, detail::Checked<StepEvent>::tie,
               detail::Checked<KvTraceEvent>::tie,        detail::Checked<SpeculativeEvent>::tie,
               detail::Checked<KvEvictionEvent>::tie,     detail::Checked<KvShadowEvent>::tie,
               detail::Checked<ErrorEvent>::tie};

}  // namespace gb::trace_fields
