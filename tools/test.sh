#!/usr/bin/env bash
# Builds everything and runs the whole test suite (command 2 of the README).
# Installs missing Debian packages first. Test data comes from ../shared next to
# the checkout, or from $GLASSBOX_SHARED_DIR.
#   tools/test.sh                 # full build: UI, CUDA if nvcc is found
#   tools/test.sh -L cpu          # extra arguments go to ctest
# With GLASSBOX_SANITIZERS=1 (.ci/run sets it) the sanitizer builds and the fuzz
# regression pass run after the main suite (tools/sanitize.sh all, docs/testing.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/tools/install-deps.sh"

build="${GLASSBOX_BUILD_DIR:-$root/build/test}"
shared="${GLASSBOX_SHARED_DIR:-$root/../shared}"
# CMake uses ccache by itself when it is installed (GLASSBOX_CCACHE), so rebuilds
# after small changes, and clean builds of an unchanged tree, are mostly cache hits.
# Unity batches for the libraries and the CLI, and line tables instead of full
# debug info (enough for backtraces and sanitizer reports; -g costs about 40% more
# compile time on the json/CLI11/Qt-heavy files): a clean build takes about half
# the time it did (docs/testing.md, "How long a clean build takes").
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLASSBOX_UNITY=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DGLASSBOX_QUICK_GLUE=ON -DGLASSBOX_SHARED_DIR="$shared" ${GLASSBOX_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"
# One test per core (most tests are single-threaded for much of their run); the
# workbench tests (label gui) run one at a time (RESOURCE_LOCK, tests/glassbox_tests.cmake).
# Every skipped case is logged (gb_test.h: a test with a skipped case and no
# failure reports Skipped) and counted here by reason.
export GLASSBOX_SKIP_LOG="$build/skipped-cases.tsv"
rm -f "$GLASSBOX_SKIP_LOG"
status=0
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)" "$@" || status=$?
if [[ -s "$GLASSBOX_SKIP_LOG" ]]; then
  echo "test.sh: $(wc -l < "$GLASSBOX_SKIP_LOG") skipped case(s), by reason:"
  cut -f2 "$GLASSBOX_SKIP_LOG" | sort | uniq -c | sort -rn | sed 's/^/  /'
  echo "  (tests and reasons: $GLASSBOX_SKIP_LOG)"
else
  echo "test.sh: no case skipped"
fi
echo "test.sh: main build and suite took $SECONDS s"
unset GLASSBOX_SKIP_LOG
[[ $status -eq 0 ]] || exit "$status"
# CI: the tests that guard the KV invariants must fail when they are broken
# (tools/mutation-check.sh; docs/testing.md, "Mutation check").
if [[ "${CI:-}" == "true" || "${GLASSBOX_MUTATIONS:-0}" == 1 ]]; then
  "$root/tools/mutation-check.sh" "$build"
fi
# CI: the Debian package builds, passes lintian, installs with apt and runs
# (tools/package.sh; docs/testing.md, "Package check").
if [[ "${CI:-}" == "true" || "${GLASSBOX_PACKAGE:-0}" == 1 ]]; then
  start=$SECONDS
  install_flag=""
  [[ "${CI:-}" == "true" && $(id -u) -eq 0 ]] && install_flag="--install"
  GLASSBOX_SHARED_DIR="$shared" "$root/tools/package.sh" $install_flag
  echo "test.sh: package build and check took $((SECONDS - start)) s"
fi
if [[ "${GLASSBOX_SANITIZERS:-0}" == 1 ]]; then
  start=$SECONDS
  GLASSBOX_SANITIZE_BUILD_ROOT="$build-sanitizers" GLASSBOX_SHARED_DIR="$shared" "$root/tools/sanitize.sh" all
  echo "test.sh: sanitizer builds, tests and fuzz regression took $((SECONDS - start)) s"
fi
