#!/bin/bash
# Session 64 (2026-12-02): session 62's rounds (its t models, fitted on today*.csv.gz of
# bench/manage_live_s62 by its rounds.sh sweep), interleaved, each turn after the hand-over
# (--handover, 2 s by default), recorded in no pass:
#   g: the code of 85e4491 (the hand-over);
#   k: the code of 24c6b33 (and a miss the quota did not hold back is not a configuration's speed).
# Run each with its code (git archive REV src, then PYTHONPATH=DIR/src).
# Usage: bash rounds.sh g|k P95.model COST.model 1 2 3   (LEVELS=16: speed levels, 8 by default)
variant=$1 p95=$2 cost=$3; shift 3
export PERFLEARN_WIRE_BIN=${PERFLEARN_WIRE_BIN:-native/wire/target/release}
service="memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0"
common=(--cores 2 --levels "${LEVELS:-8}" --max-rps 38000 --target-ms 0.196735 --power tx1 --load-args "--value-size fixed:4096")
for n in "$@"; do
  perflearn manage --service "$service" "${common[@]}" --model "$p95" --model-unit s --cost-model "$cost" \
    --step-seconds 20 --interleave -p static -p heimdall-cheapest -p hipster -p heracles-2min \
    --csv $variant$n.csv
done
