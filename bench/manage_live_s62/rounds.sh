#!/bin/bash
# Session 62 (2026-12-01, a fast host): session 45's interleaved protocol with the code of 611fa05.
#   round r1: models refitted from bench/manage_live_s36/sweep*.csv.gz (docs/manage.md's recipe);
#   rounds t1-t5: models fitted on today's two sweeps (today*.csv.gz here, `-p sweep --trace ladder`).
# Usage: bash rounds.sh sweep 1 2; bash rounds.sh round p95-today.model cost-today.model t 1 2 3 4 5
export PERFLEARN_WIRE_BIN=${PERFLEARN_WIRE_BIN:-native/wire/target/release}
service="memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0"
common=(--cores 2 --levels 8 --max-rps 38000 --target-ms 0.196735 --power tx1 --load-args "--value-size fixed:4096")
steady="policy == 'sweep' and settled and abs(rps / offered_rps - 1) < 0.05 and host_probe_us > 0"
case $1 in
  sweep) shift
    for n in "$@"; do
      perflearn manage --service "$service" "${common[@]}" -p sweep --trace ladder --step-seconds 50 --csv today$n.csv
    done
    python3 -c "import pandas as pd, glob; pd.concat(map(pd.read_csv, sorted(glob.glob('today[0-9].csv')))).to_csv('today.csv', index=False)"
    perflearn fit --csv today.csv --where "$steady and p95 > 0" -t p95 -f cores,level,offered_rps,host_probe_us \
        --context-cols offered_rps,host_probe_us --family rf --log-target yes -o p95-today.model
    perflearn fit --csv today.csv --where "$steady and utilisation < 0.85" -t cpu_us_per_request \
        -f cores,level,offered_rps,host_probe_us --context-cols offered_rps,host_probe_us --family rf --log-target yes \
        -o cost-today.model ;;
  round) p95=$2 cost=$3 tag=$4; shift 4
    for n in "$@"; do
      perflearn manage --service "$service" "${common[@]}" --model "$p95" --model-unit s --cost-model "$cost" --step-seconds 20 \
        --interleave -p static -p heimdall-cheapest -p hipster -p heracles-2min --csv $tag$n.csv
    done ;;
esac
