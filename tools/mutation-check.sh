#!/usr/bin/env bash
# Mutation check: flips one known condition in the engine at a time, rebuilds
# the test executable that guards it and expects the named test to FAIL; then
# restores the source. A test that still passes with its invariant broken
# cannot fail, and this script says so and exits 1. Run by tools/test.sh in CI
# (docs/testing.md, "Mutation check"); by hand:
#   tools/mutation-check.sh [BUILD_DIR]        (default build/test, configured)
#   tools/mutation-check.sh --table-only       (each row's line occurs once in its
#                                               file; the main suite runs this as
#                                               the test mutation_table, so a row a
#                                               refactor left stale fails at once)
# Each row: file | the exact line text | its mutation | target | test
# (target "-": nothing to build, the test reads the sources).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
table_only=0
if [[ "${1:-}" == "--table-only" ]]; then table_only=1; shift; fi
build="${1:-$root/build/test}"
mutations=(
  # Pool conservation: a block whose last holder leaves is not counted back.
  "engine/kv/block_pool.cpp|  --num_owned_;|  (void)0;|glassbox_tests_engine_kv|block_pool_test"
  # Copy-on-write: a write into a partial block another request still reads
  # (a truncation into a shared block) is not copied first.
  "engine/kv/kv_cache_manager.cpp|    if (pool_.block(last).ref_count > 1) {|    if (pool_.block(last).ref_count > 2) {|glassbox_tests_engine_kv|kv_cache_manager_test"
  # The window group releases a block one step too early (a slot still read).
  "engine/kv/kv_cache_manager.cpp|  const int32_t target = std::min(num_releasable_blocks(std::max(0, t.num_computed - lag)), t.num_blocks());|  const int32_t target = std::min(num_releasable_blocks(std::max(0, t.num_computed - lag) + (follower_ ? 1 : 0)), t.num_blocks());|glassbox_tests_engine_kv|window_group_test"
  # An inspection's window is released under it (the position's first window slot).
  "engine/kv/kv_cache_manager.cpp|  const int32_t lag = hold_last_window_.contains(id) ? 1 : 0;|  const int32_t lag = 0;|glassbox_tests_engine_runtime|test_inside"
  # Inside: attention weights without the layer's soft-cap (Gemma 2).
  "engine/runtime/inside.h|      if (softcap > 0.0f) v = softcap * std::tanh(v / softcap);|      (void)softcap;|glassbox_tests_engine_runtime|test_inside_references"
  # A mixture's routing: the chosen experts in reverse order (the set, and so the
  # logits, unchanged; every position's experts, best first, must equal transformers').
  "engine/backend/cpu_backend_moe.cpp|      const int32_t e = order[static_cast<size_t>(j)];|      const int32_t e = order[static_cast<size_t>(k - 1 - j)];|glassbox_tests_engine_runtime|test_arch_synth_refs"
  # gpt-oss's attention sink left out of the SIMD kernels' softmax denominator
  # (its max kept): the weights then sum to 1 again.
  "kernels/cpu/paged_attention_passes.inc|    if (sink) sum += std::exp(qj.sink - max_score[j]);|    (void)sink;|glassbox_tests_kernels_cpu|test_cpu_kernels"
  # The engine seam: a panel that includes an engine header (only ui/bridge may).
  "ui/panels/sampling_panel.cpp|#include \"session/json_number.h\"|#include \"runtime/engine.h\"|-|layering"
  # The CUDA plugin loader takes a plugin of another build (only the ABI number checked).
  # The HTTP layer gives a request's header no deadline (a client sending a byte
  # at a time, or 200 idle connections, would hold the server for ever).
  "engine/server/http_server.cpp|    stream_.expires_after(first ? server_->limits.header_timeout : server_->limits.idle_timeout);|    stream_.expires_after(first ? std::chrono::hours(24) : std::chrono::hours(24));|glassbox_tests_engine_server|test_server_attacks"
  # Token masks leave out the tokens that run past the end of a frame (a string's
  # closing quote and what follows it in one token).
  "engine/grammar/token_masks.cpp|      if (context == GrammarSpace::kDead) continue;|      continue;|glassbox_tests_engine_grammar|grammar_token_masks_test"
  # The engine samples without the grammar stage's mask.
  "engine/runtime/engine_outputs.cpp|    rs.chain->set_grammar_mask(grammar->mask());|    (void)0;|glassbox_tests_engine_speculative|grammar_engine_test"
  # A forward pass the backend fails ends the engine, not the step's requests.
  "engine/runtime/engine.cpp|    fail_requests(plan, \"forward pass failed: \" + forward.error().message);|    return forward.error();|glassbox_tests_engine_runtime|test_engine_backend_failure"
  # A matrix copied into huge pages loses its last byte of each row.
  "engine/backend/cpu_weights.cpp|          case Held::Copy: std::memcpy(d, s, src_row); break;|          case Held::Copy: std::memcpy(d, s, src_row - 1); break;|glassbox_tests_engine_backend|cpu_weights_test"
  # The decode prefetch cache keeps the old line of a type it measured again.
  "engine/backend/decode_tuning.cpp|    if (l->key == key && l->type == name) return;  // the new value goes last|    (void)key;|glassbox_tests_engine_backend|decode_tuning_test"
  "engine/backend/cuda_plugin.cpp|  const bool same_build = api && api->build_id && cuda_plugin_build_id() == api->build_id;|  const bool same_build = api != nullptr;|glassbox_tests_engine_backend|cuda_plugin_test"
)
backup=""
restore() {
  if [[ -n "$backup" && -f "$backup" ]]; then cp "$backup" "${backup%.mutation-orig}"; rm -f "$backup"; fi
  backup=""
}
trap restore EXIT
failures=0
targets=()
for row in "${mutations[@]}"; do
  IFS='|' read -r file line mutated target test <<<"$row"
  path="$root/$file"
  count=$(grep -cxF -- "$line" "$path" 2>/dev/null || true)
  if [[ "$count" != 1 ]]; then
    echo "mutation-check: '$line' occurs ${count:-0} times in $file (want 1): update the table" >&2
    failures=$((failures + 1)); continue
  fi
  if [[ -z "$test" || "$mutated" == "$line" ]]; then
    echo "mutation-check: the row for $file names no test or mutates nothing" >&2
    failures=$((failures + 1)); continue
  fi
  [[ "$target" != "-" ]] && targets+=("$target")
  [[ $table_only -eq 1 ]] && continue
  backup="$path.mutation-orig"
  cp "$path" "$backup"
  python3 - "$path" "$line" "$mutated" <<'PY'
import sys
path, line, mutated = sys.argv[1:]
text = open(path).read().split("\n")
text[text.index(line)] = mutated
open(path, "w").write("\n".join(text))
PY
  if [[ "$target" != "-" ]] && ! cmake --build "$build" --target "$target" >/dev/null 2>&1; then
    echo "mutation-check: $file mutated does not build" >&2; failures=$((failures + 1)); restore; continue
  fi
  if ctest --test-dir "$build" -R "^${test}\$" >/dev/null 2>&1; then
    echo "mutation-check: FAIL: $test still passes with '$mutated' in $file" >&2
    failures=$((failures + 1))
  else
    echo "mutation-check: ok: $test fails when $file says '$(echo "$mutated" | sed 's/^ *//')'"
  fi
  restore
done
if [[ $table_only -eq 1 ]]; then
  [[ $failures -eq 0 ]] || exit 1
  echo "mutation-check: ${#mutations[@]} rows, each line found once"; exit 0
fi
# The real sources again, in every target a row rebuilt.
cmake --build "$build" --target $(printf '%s\n' "${targets[@]}" | sort -u) >/dev/null
[[ $failures -eq 0 ]] || { echo "mutation-check: $failures mutation(s) not caught" >&2; exit 1; }
