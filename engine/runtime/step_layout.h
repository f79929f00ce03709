// The backend's view of a StepPlan: every scheduled request's new tokens,
// positions and block table as flat CSR arrays (BatchLayout), with exactly the
// logit rows the plan asks for (ScheduledRequest::num_logit_rows, plan order). It lives in runtime/, the one folder that sees both sides, so the
// scheduler (kv/) never depends on the backend and the backend never sees who
// owns a block.
//
// Thread: a pure function, any thread.
#pragma once

#include "backend/batch_layout.h"
#include "kv/step_plan.h"

namespace gb {

BatchLayout to_batch_layout(const StepPlan& plan);

}  // namespace gb
