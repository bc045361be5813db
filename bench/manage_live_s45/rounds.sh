#!/bin/bash
# Session 45: the legacy interleaved protocol of sessions 34-42, with the live intervals
# aligned with the load (commit 5ff108c: the sniffer is marked at the load's start; bee4fee: its ticks too).
cd /tmp/s45/rounds
export PYTHONPATH=/tmp/s45/snap/src PERFLEARN_WIRE_BIN=/work/main/native/wire/target/release
for n in "$@"; do
  python -m perflearn manage --service "memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0" --cores 2 --levels 8 --max-rps 38000 \
    --target-ms 0.196735 --power tx1 --model p95-host.model --model-unit s --cost-model cost-host.model --step-seconds 20 \
    --load-args "--value-size fixed:4096" --interleave \
    -p static -p heimdall-cheapest -p hipster -p heracles-2min \
    --csv r$n.csv > r$n.log 2>&1
  echo "round $n rc=$? $(date +%T)" >> done.txt
done
