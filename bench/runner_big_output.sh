#!/bin/bash
# Peak memory of the runner for one run whose stdout is 200 MB: no metric reading it, and a
# regex metric reading it. Prints "case maxrss_kB" per repeat; run as: sh bench/runner_big_output.sh [repeats]
set -e
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for metric in time regex; do
  cat > "$dir/$metric.toml" <<SPEC
[experiment]
name = "big-$metric"
[workload]
command = "head -c 200000000 /dev/zero | tr '\\\\0' a | fold -w 100; echo 'answer 42'"
shell = true
timeout = "60s"
[knobs.x]
values = [1]
[metrics.wall]
source = "time"
SPEC
  [ "$metric" = regex ] && printf '[metrics.answer]\nsource = "regex"\npattern = '"'"'answer (\\d+)'"'"'\n' >> "$dir/$metric.toml"
  for i in $(seq "${1:-3}"); do
    rm -f "$dir/s.duckdb"
    /usr/bin/time -f "$metric %M" python -m perflearn run "$dir/$metric.toml" --store "$dir/s.duckdb" -q 2>&1 >/dev/null | tail -1
  done
done
