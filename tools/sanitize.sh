#!/usr/bin/env bash
# Sanitizer builds and their tests (docs/testing.md); .ci/run calls it after the
# main suite. Any sanitizer report fails the run.
#   tools/sanitize.sh asan    ASan+UBSan (clang, the `fuzz` preset: also builds the
#                             fuzz harnesses on the same objects): engine, CLI,
#                             workbench and their tests, then the fuzz regression
#                             pass (and in CI a fuzz exploration)
#   tools/sanitize.sh tsan    TSan (the `tsan` preset): the thread pool and the
#                             server's engine worker
#   tools/sanitize.sh all     both
# Build folders: build/asan-fuzz and build/tsan, or $GLASSBOX_SANITIZE_BUILD_ROOT/...
# Both build in unity batches (GLASSBOX_UNITY, as tools/test.sh does): about
# 1,050 CPU-s for the ASan+fuzz build instead of 1,900.
# Extra arguments go to ctest. Suppressions (each with its reason) live in
# tools/sanitizers/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
shared="${GLASSBOX_SHARED_DIR:-$root/../shared}"
out="${GLASSBOX_SANITIZE_BUILD_ROOT:-$root/build}"
jobs="${GLASSBOX_SANITIZE_JOBS:-$(nproc)}"
supp="$root/tools/sanitizers"
GLASSBOX_SANITIZERS=1 "$root/tools/install-deps.sh"

# The ASan run: every engine, CLI, kernel and workbench test (the workbench's
# run offscreen, one at a time, as in the main suite; no Qt suppression has been
# needed: tools/sanitizers/*.supp) except the benchmarks (they
# measure speed, which means nothing here), the `slow` statistical tests and
# speculative_distribution_test (millions of draws through code the short tests
# cover -- speculative_verifier_test and speculative_engine_test run the same
# verifier under ASan; 360 s alone under ASan, a quarter of the stage) and the
# openai Python client test (it installs a package from PyPI into a venv).
ASAN_EXCLUDE='_bench$|^openai_python_client$|^speculative_distribution_test$'
ASAN_EXCLUDE_LABELS='cuda|fuzz|slow'
# The TSan run: the tests whose code runs on several threads (the server: its
# HTTP layer's I/O and worker threads under the attack suite too). A TSan build takes
# the Qt-free test runner (CMakeLists.txt), so no Qt Test thread is in the
# process: the thread pool, the server's engine worker and HTTP threads, and
# the trace writer's own thread (BackgroundTraceWriter), and
# the workbench's EngineController on its QThread driven from the main thread
# (tests/ui_threads; every hand-over goes through a gbui::Mailbox, whose mutex
# TSan sees; tools/sanitizers/tsan.supp names the two Qt/glib wake-up reports
# it leaves and why). docs/testing.md, "Sanitizer builds".
TSAN_TESTS=(core_thread_pool_test test_openai_server test_server_attacks ui_controller_threads_test trace_writer_test)
# ... and the test executables that hold them (one per test folder, tests/glassbox_tests.cmake).
TSAN_TARGETS=(glassbox_tests_engine_core glassbox_tests_engine_server glassbox_tests_ui_threads glassbox_tests_engine_trace)

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:print_suppressions=0"

# Qt Test's watchdog aborts a test function after 5 minutes; sanitized code on a
# loaded 2-core machine can need longer (CTest's own timeout still applies).
export QTEST_FUNCTION_TIMEOUT=1800000

section() { printf '\n== sanitize: %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

run_asan() {
  local dir="$out/asan-fuzz"
  section "ASan+UBSan build in $dir"
  cmake --preset fuzz -B "$dir" -DGLASSBOX_SHARED_DIR="$shared" -DGLASSBOX_UNITY=ON -DGLASSBOX_QUICK_GLUE=ON ${GLASSBOX_CMAKE_ARGS:-}
  cmake --build "$dir" -j "$jobs"
  section "ASan+UBSan tests"
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" -LE "$ASAN_EXCLUDE_LABELS" -E "$ASAN_EXCLUDE" "$@"
  section "fuzz regression (corpus + fixed mutations per harness)"
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" -L fuzz "$@"
  # CI also explores: GLASSBOX_FUZZ_EXPLORE_SECONDS per harness (CI: 120), two
  # at a time, from the committed corpora (a finding fails the run).
  local explore="${GLASSBOX_FUZZ_EXPLORE_SECONDS:-}"
  [[ -z "$explore" && "${CI:-}" == "true" ]] && explore=120
  if [[ -n "$explore" && "$explore" != 0 ]]; then
    section "fuzz exploration ($explore s per harness)"
    "$root/tools/fuzz.sh" --build "$dir" --explore "$explore"
  fi
}

run_tsan() {
  local dir="$out/tsan"
  section "TSan build in $dir"
  cmake --preset tsan -B "$dir" -DGLASSBOX_SHARED_DIR="$shared" -DGLASSBOX_UNITY=ON -DGLASSBOX_QUICK_GLUE=ON ${GLASSBOX_CMAKE_ARGS:-}
  cmake --build "$dir" -j "$jobs" --target "${TSAN_TARGETS[@]}"
  section "TSan tests"
  local regex
  regex="^($(IFS='|'; echo "${TSAN_TESTS[*]}"))\$"
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" -R "$regex" "$@"
}

what="${1:-all}"
shift || true
case "$what" in
  asan) run_asan "$@" ;;
  tsan) run_tsan "$@" ;;
  all) run_asan "$@"; run_tsan "$@" ;;
  *) sed -n '2,12p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
