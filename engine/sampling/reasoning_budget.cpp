// ReasoningBudget; see reasoning_budget.h.
#include "sampling/reasoning_budget.h"

#include <algorithm>

namespace gb {

ReasoningBudget::ReasoningBudget(ReasoningBudgetSettings settings, std::vector<TokenId> close_marker_ids)
    : settings_(std::move(settings)), close_ids_(std::move(close_marker_ids)) {
  inside_ = settings_.starts_inside && !settings_.open_marker.empty() && !settings_.close_marker.empty();
}

void ReasoningBudget::observe(TokenId id, std::string_view decoded_piece) {
  if (settings_.open_marker.empty() || settings_.close_marker.empty()) return;
  if (inside_) {
    ++num_tokens_;
    const bool forcing = settings_.max_tokens >= 0 && num_tokens_ - 1 >= settings_.max_tokens;
    if (forcing && num_forced_ < close_ids_.size() && id == close_ids_[num_forced_]) ++num_forced_;
  }
  tail_.append(decoded_piece);
  const std::string& marker = inside_ ? settings_.close_marker : settings_.open_marker;
  const size_t pos = tail_.find(marker);
  if (pos != std::string::npos) {
    tail_.erase(0, pos + marker.size());
    inside_ = !inside_;
    num_tokens_ = 0;
    num_forced_ = 0;
  } else if (inside_ && !close_ids_.empty() && num_forced_ == close_ids_.size()) {
    // Every forced id is out but their text did not spell the marker (a
    // tokenizer quirk): the region is closed all the same.
    inside_ = false;
    num_tokens_ = 0;
    num_forced_ = 0;
    tail_.clear();
  }
  // Keep only what could still be the start of a marker.
  const size_t keep = std::max(settings_.open_marker.size(), settings_.close_marker.size());
  if (tail_.size() > keep) tail_.erase(0, tail_.size() - keep);
}

std::span<const TokenId> ReasoningBudget::forced_next() const {
  if (!inside_ || settings_.max_tokens < 0 || num_tokens_ < settings_.max_tokens) return {};
  return std::span<const TokenId>(close_ids_).subspan(num_forced_);
}

std::vector<TokenId> ReasoningBudget::forced_for(std::string_view text_so_far, int num_tokens_since_open) const {
  if (settings_.max_tokens < 0 || settings_.open_marker.empty() || settings_.close_marker.empty()) return {};
  const size_t open = text_so_far.rfind(settings_.open_marker);
  if (open == std::string_view::npos) return {};
  if (text_so_far.find(settings_.close_marker, open + settings_.open_marker.size()) != std::string_view::npos)
    return {};
  if (num_tokens_since_open < settings_.max_tokens) return {};
  return close_ids_;
}

}  // namespace gb
