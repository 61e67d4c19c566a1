#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs one libFuzzer target for a bounded time (ctest fuzz.NAME; tools/sanitize.sh).
# Usage: run_fuzzer.sh FUZZER SEED_DIR SECONDS
# New inputs go to ./corpus-NAME (the seeds in the source tree are only read); a finding is
# written to ./artifacts/NAME-* and fails the test. -timeout=10: an input that runs 10 s is a hang.
set -euo pipefail
fuzzer=$1 seeds=$2 seconds=$3
name=$(basename "$seeds")
mkdir -p "corpus-$name" artifacts
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="artifacts/$name-" "corpus-$name" "$seeds"
