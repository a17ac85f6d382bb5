#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer target of BUILD/fuzz for SECONDS, JOBS at a
# time, starting from its seed corpus (tests/fuzz/corpus/<target>) and its saved
# crash inputs (tests/fuzz/regressions/<target>), and prints one row per
# target: executions, coverage (cov: edges, ft: features, from libFuzzer's
# last status line) and crashes. New inputs go to BUILD/fuzz-corpus/<target>;
# a crash, leak, timeout or out-of-memory input is written to
# tests/fuzz/regressions/<target>/, where ctest replays it in the normal build.
# Usage: run.sh BUILD SECONDS JOBS [TARGET...]
set -euo pipefail
build=$1 seconds=$2 jobs=$3
shift 3
root=$(cd "$(dirname "$0")/../.." && pwd)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for bin in "$build"/fuzz/fuzz_*; do targets+=("${bin##*/fuzz_}"); done
fi
logs="$build/fuzz-logs"
mkdir -p "$logs"

run_one() {
  local t=$1 regressions="$root/tests/fuzz/regressions/$1"
  mkdir -p "$build/fuzz-corpus/$t" "$regressions"
  ls "$regressions" > "$logs/$t.before"
  # -close_fd_mask=1: the targets' stdout (--help text) is noise; reports go to stderr.
  "$build/fuzz/fuzz_$t" "$build/fuzz-corpus/$t" "$root/tests/fuzz/corpus/$t" "$regressions" \
    -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -print_final_stats=1 -close_fd_mask=1 -artifact_prefix="$regressions/" \
    > "$logs/$t.log" 2>&1 || true
  ls "$regressions" > "$logs/$t.after"
}
export -f run_one
export build seconds root logs
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'

printf '%-12s %12s %8s %8s %8s\n' target runs cov ft crashes
status=0
for t in "${targets[@]}"; do
  log="$logs/$t.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  cov=$(sed -E 's/.*cov: ([0-9]+).*/\1/' <<< "$last")
  ft=$(sed -E 's/.*ft: ([0-9]+).*/\1/' <<< "$last")
  crashes=$(comm -13 "$logs/$t.before" "$logs/$t.after" | wc -l)
  printf '%-12s %12s %8s %8s %8s\n' "$t" "${runs:-?}" "${cov:-?}" "${ft:-?}" "$crashes"
  if [ "$crashes" -gt 0 ] || [ -z "$runs" ]; then status=1; fi
done
if [ $status -ne 0 ]; then
  echo "crashes (or a target that did not finish): see $logs/<target>.log; the inputs are in" \
    "tests/fuzz/regressions/<target>/ — fix the bug and commit them, ctest replays them"
fi
exit $status
