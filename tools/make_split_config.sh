#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/make_split_config.sh IN.ini OUT.ini: a dis-mellin config with the symmetric sea
# turned into the split sea ([model] sea = split): the sea_* sections become ubar_* (ubar_N
# starting at a fifth of sea_N's start, the symmetric default's kappa = 0.5 share), and dbar_*
# and s_* sections follow, dbar with the same start, s + sbar with its small-x and large-x
# exponents fixed so that the free parameters stay within the batched paths' 16 (13 of the
# symmetric inputs + dbar_N, dbar_b, s_N). Shell only: the GPU machine has no python.
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 IN.ini OUT.ini" >&2; exit 2; }
sea_n=$(awk '/^\[param.sea_N\]/ {s = 1; next} /^\[/ {s = 0} s && /^start *=/ {print $3; exit}' "$1")
ubar_n=$(awk -v n="$sea_n" 'BEGIN {printf "%.6g", n / 5}')
awk -v u="$ubar_n" '
    /^\[param.sea_/ { sub(/\[param.sea_/, "[param.ubar_"); sec = $0 }
    /^\[/ && !/^\[param.ubar_/ { sec = $0 }
    sec == "[param.ubar_N]" && /^start *=/ { $0 = "start = " u }
    { print }
    /^name *= *dis-mellin/ { print "sea = split" }' "$1" > "$2"
cat >> "$2" <<INI

# dbar and s + sbar (the split sea, made by tools/make_split_config.sh)
[param.dbar_N]
start = $ubar_n
lower = 0.0
upper = 1.0

[param.dbar_a]
start = -1.1
lower = -1.89
upper = 10.0
fixed = true

[param.dbar_b]
start = 7.0
lower = 0.0
upper = 20.0

[param.dbar_c]
start = 0.0
fixed = true

[param.dbar_d]
start = 0.0
fixed = true

[param.s_N]
start = $ubar_n
lower = 0.0
upper = 1.0

[param.s_a]
start = -1.1
lower = -1.89
upper = 10.0
fixed = true

[param.s_b]
start = 8.0
lower = 0.0
upper = 20.0
fixed = true

[param.s_c]
start = 0.0
fixed = true

[param.s_d]
start = 0.0
fixed = true
INI
