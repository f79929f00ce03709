#!/usr/bin/env bash
# Builds Glassbox if needed and launches it on a model (command 1 of the README).
#   tools/launch.sh                    # the starter model, ../shared/models/stories260K
#   tools/launch.sh path/to/model.gguf [extra arguments for glassbox]
# Installs missing Debian packages first. Opens the workbench window when the UI
# is built; on a machine without a display it falls back to an interactive
# command-line session.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tools/install-deps.sh"

build="${GLASSBOX_BUILD_DIR:-$root/build/release}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLASSBOX_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target glassbox-cli $( [[ -f "$root/app/gui/CMakeLists.txt" ]] && echo glassbox )

starter="${GLASSBOX_SHARED_DIR:-$root/../shared}/models/stories260K/stories260K.bin"
model="${1:-$starter}"
[[ $# -gt 0 ]] && shift
if [[ ! -f "$model" ]]; then
  echo "glassbox: model not found: $model" >&2
  echo "  Get one: see README.md, 'Models'." >&2
  exit 1
fi

gui="$build/app/gui/glassbox"
if [[ -x "$gui" && ( -n "${DISPLAY:-}" || -n "${WAYLAND_DISPLAY:-}" || "${QT_QPA_PLATFORM:-}" == offscreen ) ]]; then
  exec "$gui" --model "$model" "$@"
fi

cli="$build/app/glassbox-cli"
echo "Glassbox (terminal mode) on $model. Type a prompt, empty line or Ctrl-D to quit." >&2
while IFS= read -r -p "prompt> " prompt && [[ -n "$prompt" ]]; do
  "$cli" generate --model "$model" --prompt "$prompt" --max-tokens 256 "$@" || true
done
