// StepPlan -> BatchLayout (see step_layout.h).
#include "runtime/step_layout.h"

#include "core/check.h"

namespace gb {

BatchLayout to_batch_layout(const StepPlan& plan) {
  BatchLayout layout;
  layout.block_size = plan.block_size;
  bool slotted = false;
  for (const ScheduledRequest& r : plan.requests) slotted = slotted || !r.kv_slots.empty() || r.mass_from >= 0;
  for (const ScheduledRequest& r : plan.requests) {
    GB_CHECK(static_cast<int32_t>(r.token_ids.size()) == r.num_new_tokens && r.num_new_tokens > 0);
    layout.add_sequence_rows(r.token_ids.data(), r.num_new_tokens, r.start_pos, r.block_ids.data(),
                             static_cast<int32_t>(r.block_ids.size()), r.num_logit_rows);
    if (!r.window_block_ids.empty())
      layout.add_window_table(r.window_block_ids.data(), static_cast<int32_t>(r.window_block_ids.size()));
    if (slotted) layout.add_kv_slots(r.kv_slots.empty() ? nullptr : r.kv_slots.data(), r.num_kv_slots, r.mass_from);
  }
  return layout;
}

}  // namespace gb
