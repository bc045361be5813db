#!/bin/bash
# Session 66 (2026-12-02): session 64's rounds (session 62's t models), interleaved with the
# hand-over, with a fifth policy taking its turns: heimdall-cheapest:wide, the same rules and
# models at --headroom 0.95, beside heimdall-cheapest at the default 0.9. Paired in every
# round, on the same host at the same minutes: does the wider headroom save more than it misses?
# Usage: bash rounds.sh w P95.model COST.model 1 2 3
variant=$1 p95=$2 cost=$3; shift 3
export PERFLEARN_WIRE_BIN=${PERFLEARN_WIRE_BIN:-native/wire/target/release}
service="memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0"
common=(--cores 2 --levels 8 --max-rps 38000 --target-ms 0.196735 --power tx1 --load-args "--value-size fixed:4096")
for n in "$@"; do
  perflearn manage --service "$service" "${common[@]}" --model "$p95" --model wide="$p95" --model-unit s \
    --cost-model "$cost" --headroom wide=0.95 --step-seconds 20 --interleave \
    -p static -p heimdall-cheapest -p heimdall-cheapest:wide -p hipster -p heracles-2min --csv $variant$n.csv
done
