#!/bin/bash
# Session 65 (2026-12-02): session 62's rounds (its t models, fitted on today*.csv.gz of
# bench/manage_live_s62 by its rounds.sh sweep), interleaved with the hand-over, taken in
# turns m1 n1 m2 n2 (ABAB):
#   m: the code of f0be069 (session 64's);
#   n: with the cheapest rules idle at the most capacity within 1 % of the least power.
# Run each with its code (git archive REV src, then PYTHONPATH=DIR/src).
# Usage: bash rounds.sh m|n P95.model COST.model 1 2
variant=$1 p95=$2 cost=$3; shift 3
export PERFLEARN_WIRE_BIN=${PERFLEARN_WIRE_BIN:-native/wire/target/release}
service="memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0"
common=(--cores 2 --levels 8 --max-rps 38000 --target-ms 0.196735 --power tx1 --load-args "--value-size fixed:4096")
for n in "$@"; do
  perflearn manage --service "$service" "${common[@]}" --model "$p95" --model-unit s --cost-model "$cost" \
    --step-seconds 20 --interleave -p static -p heimdall-cheapest -p hipster -p heracles-2min \
    --csv $variant$n.csv
done
