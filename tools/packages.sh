#!/usr/bin/env bash
# tools/packages.sh GROUP...: prints the package names of the named groups of
# tools/packages.txt, one a line, in the file's order (a name in two groups
# once). An unknown group is an error, so a misspelt name cannot select nothing.
set -euo pipefail

list="$(dirname "${BASH_SOURCE[0]}")/packages.txt"
(($# > 0)) || { echo "usage: tools/packages.sh GROUP..." >&2; exit 2; }

awk -v wanted="$*" '
  BEGIN { n = split(wanted, w, " "); for (i = 1; i <= n; ++i) want[w[i]] = 1 }
  { sub(/#.*/, "") }
  /^[ \t]*\[[^]]+\][ \t]*$/ {
    group = $0; gsub(/[][ \t]/, "", group); seen[group] = 1; next
  }
  (group in want) { for (i = 1; i <= NF; ++i) if (!printed[$i]++) print $i }
  END {
    for (g in want) if (!seen[g]) { print "tools/packages.sh: no group [" g "] in " FILENAME > "/dev/stderr"; bad = 1 }
    exit bad
  }
' "$list"
