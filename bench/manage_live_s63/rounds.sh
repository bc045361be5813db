#!/bin/bash
# Session 63 (2026-12-01/02): session 62's rounds (its t models, fitted on today*.csv.gz of
# bench/manage_live_s62 by its rounds.sh sweep) with
#   h: the code of 600a489 (session 62's) and --headroom 0.95;
#   f: the code of eb0d729 (the profile's cost a floor on the headroom's demand), default headroom.
# Usage: bash rounds.sh h|f P95.model COST.model 1 2 3
variant=$1 p95=$2 cost=$3; shift 3
export PERFLEARN_WIRE_BIN=${PERFLEARN_WIRE_BIN:-native/wire/target/release}
service="memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0"
common=(--cores 2 --levels 8 --max-rps 38000 --target-ms 0.196735 --power tx1 --load-args "--value-size fixed:4096")
extra=(); [ "$variant" = h ] && extra=(--headroom 0.95)
for n in "$@"; do
  perflearn manage --service "$service" "${common[@]}" --model "$p95" --model-unit s --cost-model "$cost" \
    --step-seconds 20 "${extra[@]}" --interleave -p static -p heimdall-cheapest -p hipster -p heracles-2min \
    --csv $variant$n.csv
done
