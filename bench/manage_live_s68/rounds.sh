#!/bin/bash
# Session 68 (2026-12-02): session 64's four policies, interleaved, on a grid of 16 speed levels
# (quota steps of 1/16 core) where every earlier round had 8: the seed's machine had 17 frequencies.
# Every policy runs on the same grid; the models are session 62's t models, fitted on its 8-level
# sweeps (a level between two profiled ones is forecast as one of them).
# Usage: bash rounds.sh f P95.model COST.model 1 2 3   (the code of 00dd250: git archive, PYTHONPATH)
variant=$1 p95=$2 cost=$3; shift 3
export PERFLEARN_WIRE_BIN=${PERFLEARN_WIRE_BIN:-native/wire/target/release}
service="memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0"
common=(--cores 2 --levels 16 --max-rps 38000 --target-ms 0.196735 --power tx1 --load-args "--value-size fixed:4096")
for n in "$@"; do
  perflearn manage --service "$service" "${common[@]}" --model "$p95" --model-unit s --cost-model "$cost" \
    --step-seconds 20 --interleave -p static -p heimdall-cheapest -p hipster -p heracles-2min --csv $variant$n.csv
done
