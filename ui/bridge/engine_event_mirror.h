// The UI mirror of the trace events (ui_events.h), generated from the engine's
// field lists (engine/trace/trace_fields.h). Part of the EngineController bridge:
// only engine_translation.cpp includes it, so the panels still never see
// engine headers.
//
// Per engine type, MirrorOf<E> lists each engine member's UI member
// (`to(&gb::X::a, &UiX::b)`) and the engine members the UI does not show
// (`skip(&gb::X::c)`). A static_assert requires every entry of FieldsOf<E> to be
// mirrored or skipped exactly once, so a field added to an event does not compile
// until the UI decides what to do with it. mirror() copies the listed members,
// converting types (std::string -> QString, vectors -> QVector, ids -> keys).
// The UI enums that copy engine enums are pinned here enumerator by enumerator.
// Threads: pure functions, run on the controller's thread.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "trace/trace_fields.h"
#include "session/ui_events.h"

namespace gbui::mirror {

// ---- the enum mirrors --------------------------------------------------------
#define GB_SAME_ENUMERATOR(UiEnum, EngineEnum, name) \
  static_assert(static_cast<int>(UiEnum::name) == static_cast<int>(EngineEnum::name), #UiEnum "::" #name)
GB_SAME_ENUMERATOR(UiTokenOrigin, gb::TokenOrigin, Plain);
GB_SAME_ENUMERATOR(UiTokenOrigin, gb::TokenOrigin, Accepted);
GB_SAME_ENUMERATOR(UiTokenOrigin, gb::TokenOrigin, Resampled);
GB_SAME_ENUMERATOR(UiTokenOrigin, gb::TokenOrigin, Bonus);
GB_SAME_ENUMERATOR(UiTokenOrigin, gb::TokenOrigin, Forced);
static_assert(gb::trace_fields::EnumInfo<gb::TokenOrigin>::count == 5, "gb::TokenOrigin grew: extend UiTokenOrigin");
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Allocated);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Evicted);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Cached);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, PrefixHit);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Shared);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Copied);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Released);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Freed);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Uncached);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, WindowReleased);
GB_SAME_ENUMERATOR(UiKvKind, gb::KvEventKind, Lookahead);
static_assert(gb::trace_fields::EnumInfo<gb::KvEventKind>::count == 11, "gb::KvEventKind grew: extend UiKvKind");
#undef GB_SAME_ENUMERATOR

// ---- table entries -----------------------------------------------------------
template <class E, class EM, class U, class UM>
struct To {
  EM E::*from;
  UM U::*to;
};
template <class E, class EM>
struct Skip {
  EM E::*member;
};
template <class E, class EM, class U, class UM>
constexpr To<E, EM, U, UM> to(EM E::*from, UM U::*target) {
  return {from, target};
}
template <class E, class EM>
constexpr Skip<E, EM> skip(EM E::*member) {
  return {member};
}

template <class E>
struct MirrorOf;

template <>
struct MirrorOf<gb::RequestSubmittedEvent> {
  using E = gb::RequestSubmittedEvent;
  using U = UiSubmitted;
  static constexpr auto list =
      std::tuple{to(&E::request, &U::request),       to(&E::prompt_ids, &U::promptIds),
                 to(&E::max_tokens, &U::maxTokens),  skip(&E::priority),
                 to(&E::sampler_settings, &U::samplerJson), to(&E::parent, &U::parent),
                 to(&E::fork_position, &U::forkPosition), to(&E::purpose, &U::purpose)};
};
template <>
struct MirrorOf<gb::RequestAdmittedEvent> {
  using E = gb::RequestAdmittedEvent;
  using U = UiAdmitted;
  static constexpr auto list = std::tuple{to(&E::request, &U::request),
                                          to(&E::num_cached_tokens, &U::numCachedTokens),
                                          to(&E::queue_ms, &U::queueMs)};
};
template <>
struct MirrorOf<gb::PrefillChunkEvent> {
  using E = gb::PrefillChunkEvent;
  using U = UiPrefill;
  static constexpr auto list = std::tuple{to(&E::request, &U::request), to(&E::step, &U::step),
                                          to(&E::start_position, &U::start), to(&E::num_tokens, &U::numTokens)};
};
template <>
struct MirrorOf<gb::RequestPreemptedEvent> {
  using E = gb::RequestPreemptedEvent;
  using U = UiPreempted;
  static constexpr auto list = std::tuple{to(&E::request, &U::request), to(&E::step, &U::step)};
};
template <>
struct MirrorOf<gb::RequestFinishedEvent> {
  using E = gb::RequestFinishedEvent;
  using U = UiFinished;
  static constexpr auto list = std::tuple{to(&E::request, &U::request),
                                          to(&E::reason, &U::reason),
                                          to(&E::num_prompt_tokens, &U::numPromptTokens),
                                          to(&E::num_generated, &U::numGenerated),
                                          to(&E::num_cached_tokens, &U::numCachedTokens),
                                          to(&E::ttft_ms, &U::ttftMs),
                                          to(&E::tpot_ms, &U::tpotMs),
                                          to(&E::e2e_ms, &U::e2eMs),
                                          to(&E::text, &U::text)};
};
template <>
struct MirrorOf<gb::StepEvent> {
  using E = gb::StepEvent;
  using U = UiStep;
  static constexpr auto list = std::tuple{to(&E::step, &U::step),
                                          to(&E::start_ms, &U::startMs),
                                          to(&E::schedule_ms, &U::scheduleMs),
                                          to(&E::forward_ms, &U::forwardMs),
                                          to(&E::sample_ms, &U::sampleMs),
                                          to(&E::num_seqs, &U::numSeqs),
                                          to(&E::num_prefill_tokens, &U::numPrefill),
                                          to(&E::num_decode_tokens, &U::numDecode),
                                          to(&E::num_running, &U::numRunning),
                                          to(&E::num_waiting, &U::numWaiting),
                                          to(&E::num_blocks_owned, &U::owned),
                                          to(&E::num_blocks_free, &U::free),
                                          to(&E::num_blocks_cached, &U::cached),
                                          to(&E::num_blocks_total, &U::total),
                                          to(&E::num_prefix_hit_tokens, &U::prefixHitTokens),
                                          to(&E::num_preemptions, &U::preemptions),
                                          to(&E::num_window_blocks_owned, &U::windowOwned),
                                          to(&E::num_window_blocks_cached, &U::windowCached),
                                          to(&E::num_window_blocks_total, &U::windowTotal)};
};
template <>
struct MirrorOf<gb::KvEvent> {
  using E = gb::KvEvent;
  using U = UiKv;
  static constexpr auto list =
      std::tuple{to(&E::kind, &U::kind),           to(&E::block, &U::block),
                 to(&E::request, &U::request),     to(&E::other_block, &U::otherBlock),
                 to(&E::ref_count, &U::refCount),  skip(&E::hash)};
};
template <>
struct MirrorOf<gb::KvTraceEvent> {
  using E = gb::KvTraceEvent;
  using U = UiKv;
  // `kv` mirrors into the same UiKv through MirrorOf<gb::KvEvent>.
  static constexpr auto list = std::tuple{to(&E::step, &U::step), skip(&E::kv)};
};
template <>
struct MirrorOf<gb::SpeculativeEvent> {
  using E = gb::SpeculativeEvent;
  using U = UiSpeculative;
  static constexpr auto list = std::tuple{to(&E::request, &U::request),
                                          to(&E::step, &U::step),
                                          to(&E::drafter, &U::drafter),
                                          to(&E::drafted, &U::drafted),
                                          to(&E::q, &U::q),
                                          to(&E::p, &U::p),
                                          to(&E::num_accepted, &U::numAccepted),
                                          to(&E::rejected, &U::rejected),
                                          to(&E::next, &U::next),
                                          to(&E::bonus, &U::bonus),
                                          to(&E::draft_ms, &U::draftMs),
                                          to(&E::verify_ms, &U::verifyMs)};
};
template <>
struct MirrorOf<gb::KvEvictionEvent> {
  using E = gb::KvEvictionEvent;
  using U = UiEviction;
  static constexpr auto list = std::tuple{to(&E::request, &U::request),
                                          to(&E::step, &U::step),
                                          to(&E::policy, &U::policy),
                                          to(&E::reason, &U::reason),
                                          to(&E::positions, &U::positions),
                                          to(&E::mass, &U::mass),
                                          to(&E::num_kept, &U::numKept),
                                          to(&E::kept_positions, &U::keptPositions),
                                          to(&E::kept_mass, &U::keptMass)};
};
template <>
struct MirrorOf<gb::KvShadowEvent> {
  using E = gb::KvShadowEvent;
  using U = UiShadowKl;
  static constexpr auto list = std::tuple{to(&E::request, &U::request),
                                          to(&E::shadow, &U::shadow),
                                          to(&E::step, &U::step),
                                          to(&E::position, &U::position),
                                          to(&E::index, &U::index),
                                          to(&E::kl, &U::kl),
                                          to(&E::top1_agree, &U::top1Agree),
                                          to(&E::logprob_pruned, &U::logprobPruned),
                                          to(&E::logprob_full, &U::logprobFull)};
};
template <>
struct MirrorOf<gb::ErrorEvent> {
  using E = gb::ErrorEvent;
  using U = UiError;
  static constexpr auto list = std::tuple{to(&E::request, &U::request), to(&E::message, &U::message)};
};
template <>
struct MirrorOf<gb::TokenSampledEvent> {
  using E = gb::TokenSampledEvent;
  using U = UiToken;
  // `record` mirrors into the same UiToken through MirrorOf<gb::TokenRecord>.
  static constexpr auto list = std::tuple{to(&E::request, &U::request), to(&E::step, &U::step),
                                          to(&E::position, &U::position), to(&E::index, &U::index),
                                          to(&E::token, &U::tokenId),   to(&E::text, &U::text),
                                          to(&E::origin, &U::origin),   skip(&E::record)};
};
template <>
struct MirrorOf<gb::TokenRecord> {
  using E = gb::TokenRecord;
  using U = UiToken;
  // Not shown: `chosen` (the token id again), its raw logit (the candidate list
  // has it), the RNG counter and the XTC draw.
  static constexpr auto list = std::tuple{to(&E::stages, &U::stages),
                                          to(&E::stage_active, &U::stageActive),
                                          to(&E::num_candidates_after_stage, &U::numAfterStage),
                                          to(&E::num_candidates_before, &U::numCandidatesBefore),
                                          to(&E::top, &U::top),
                                          to(&E::entropy_before, &U::entropyBefore),
                                          to(&E::entropy_after, &U::entropyAfter),
                                          skip(&E::chosen),
                                          skip(&E::chosen_logit),
                                          to(&E::chosen_prob_before, &U::probBefore),
                                          to(&E::chosen_prob, &U::prob),
                                          to(&E::chosen_rank, &U::rank),
                                          skip(&E::rng_counter),
                                          to(&E::draw, &U::draw),
                                          skip(&E::xtc_draw),
                                          to(&E::xtc_fired, &U::xtcFired),
                                          skip(&E::grammar),  // engine_translation.cpp: UiToken::grammar
                                          skip(&E::routing),  // engine_translation.cpp: UiToken::routing
                                          to(&E::forward_ms, &U::forwardMs),
                                          to(&E::sample_ms, &U::sampleMs)};
};
template <>
struct MirrorOf<gb::CandidateRecord> {
  using E = gb::CandidateRecord;
  using U = UiCandidate;  // `text` is filled from the vocabulary by the caller
  static constexpr auto list =
      std::tuple{to(&E::id, &U::id), to(&E::logit, &U::logit), to(&E::prob_before, &U::probBefore),
                 to(&E::prob_after_stage, &U::probAfter), to(&E::removed_by_stage, &U::removedByStage)};
};

// ---- the completeness check --------------------------------------------------
template <class Entry>
constexpr auto engine_member(const Entry& e) {
  if constexpr (requires { e.from; }) return e.from;
  else return e.member;
}
template <class Entry>
constexpr auto field_member(const Entry& e) {
  return e.ptr;
}

// How many entries of MirrorOf<E> name the member `ptr`.
template <class E, class P>
constexpr int times_mirrored(P ptr) {
  int n = 0;
  std::apply(
      [&](const auto&... entry) {
        ((n += [&] {
           if constexpr (std::is_same_v<decltype(engine_member(entry)), P>) return engine_member(entry) == ptr ? 1 : 0;
           else return 0;
         }()),
         ...);
      },
      MirrorOf<E>::list);
  return n;
}

// Every field of FieldsOf<E> is mirrored or skipped exactly once, and the table
// has no other entries.
template <class E>
constexpr bool mirror_is_complete() {
  bool ok = true;
  gb::trace_fields::for_each_field<E>([&](const auto& entry) { ok = ok && times_mirrored<E>(field_member(entry)) == 1; });
  return ok && std::tuple_size_v<decltype(MirrorOf<E>::list)> == gb::trace_fields::num_fields<E>;
}

// ---- copying -------------------------------------------------------------------
template <class From, class To>
void convert(const From& from, To& out);

template <class E, class U>
void mirror(const E& from, U& out) {
  static_assert(mirror_is_complete<E>(), "every field of the engine type must be mirrored or skipped (MirrorOf)");
  std::apply(
      [&](const auto&... entry) {
        (
            [&] {
              if constexpr (requires { entry.to; }) convert(from.*entry.from, out.*entry.to);
            }(),
            ...);
      },
      MirrorOf<E>::list);
}

template <class From, class To>
void convert(const From& from, To& out) {
  if constexpr (std::is_same_v<From, std::string>) {
    out = QString::fromStdString(from);
  } else if constexpr (std::is_same_v<From, gb::RequestId> && std::is_same_v<To, std::optional<RequestKey>>) {
    if (from == gb::kNoRequest) out = std::nullopt;  // a pool-internal KV event
    else out = from.value;
  } else if constexpr (std::is_same_v<From, gb::RequestId>) {
    out = from.value;
  } else if constexpr (std::is_same_v<From, gb::BlockId>) {
    out = from.value;
  } else if constexpr (std::is_same_v<From, std::optional<gb::RequestId>>) {
    out = from ? std::optional<RequestKey>(from->value) : std::nullopt;
  } else if constexpr (std::is_same_v<From, std::optional<std::string>>) {
    out = from ? std::optional<QString>(QString::fromStdString(*from)) : std::nullopt;
  } else if constexpr (std::is_same_v<From, std::optional<gb::TokenId>>) {  // also optional<int32_t> counts
    out = from ? *from : -1;  // the UI's "none"
  } else if constexpr (std::is_enum_v<From>) {
    out = static_cast<To>(from);  // the enum mirrors are pinned above
  } else if constexpr (std::is_same_v<From, std::vector<gb::SamplerStage>>) {
    for (gb::SamplerStage s : from) {
      const std::string_view name = gb::sampler_stage_name(s);
      out << QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
    }
  } else if constexpr (std::is_same_v<From, std::vector<uint8_t>>) {
    for (uint8_t a : from) out << (a != 0);
  } else if constexpr (requires { MirrorOf<typename From::value_type>::list; }) {
    out.reserve(static_cast<qsizetype>(from.size()));
    for (const auto& x : from) mirror(x, out.emplace_back());
  } else if constexpr (requires { from.begin(); }) {
    out = To(from.begin(), from.end());
  } else {
    static_assert(std::is_arithmetic_v<From> && std::is_arithmetic_v<To>, "no conversion for this member");
    out = static_cast<To>(from);
  }
}

}  // namespace gbui::mirror
