#!/bin/sh
# The live comparison of bench/manage.md: real memcached on this machine, every policy
# on the same steps trace, one session. Run it on a quiet machine (nothing else busy):
#
#   sh bench/manage_live.sh [STORE] [STEP_SECONDS] [POWER] [LEVELS]
#
# POWER: the power model the policies decide with and energy is reported under (server,
# the default, or tx1: the seed's proportionality; see docs/manage.md). Rerun on the
# same STORE, the knee and profile runs are reused (--resume) and only the policies run.
# LEVELS: speed levels per core, 4 (the default: quarters of a CPU) or 8 (eighths); the
# profile measures eighths, so it serves both (bench/manage.md, session 18).
#
# 1. the knee of memcached's load-latency curve at maximum configuration -> QoS target
#    and maximum load (seed 4.1.3); 2. Heimdall's profiling sweep over the manager's
#    configurations x load (10-120 % of the maximum load); 3. a random forest of log p95 from its 1-s wire intervals
#    against the offered rate (not the interval's measured rate: see bench/manage.md, session 16);
#    4. every policy.
set -e
cd "$(dirname "$0")/.."
store=${1:-/tmp/perflearn-manage-live.duckdb}
step=${2:-20}
power=${3:-server}
levels=${4:-4}
service="memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0"

perflearn run examples/memcached-knee/spec.toml -s "$store" --resume -q
# a knee past a latency jump (this VM's memcached saturates within one step of the sweep)
# would put the maximum load where even the maximum configuration has no headroom
knee=$(perflearn knee memcached-knee --x rate --y wire_p95 -s "$store" --before-jump)
echo "$knee"
target_us=$(echo "$knee" | sed -n 's/.*QoS target \([0-9.e+]*\),.*/\1/p')
max_rps=$(echo "$knee" | sed -n 's/.*maximum load \([0-9.e+]*\) .*/\1/p')
target_ms=$(python3 -c "print($target_us / 1000)")

# Profile at loads relative to the maximum, as the seed's training set is its load trace
# run at every configuration (section 4.2.1): 10 % steps up to the maximum, and 120 % so
# the model has seen what lies past it.
rates=$(python3 -c "print(','.join(str(round($max_rps * f / 10)) for f in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12)))")
perflearn run examples/memcached-profile/spec.toml -s "$store" --resume -q --values rate="$rates"
perflearn fit -e memcached-profile -s "$store" --per-sample --warmup 1 -t wire.p95_us \
    -f cores,quota,rate --family rf --log-target yes -o /tmp/perflearn-manage-p95.model
# the CPU time per request as profiled, over the runs that were not saturated (a saturated
# run's requests outnumber what it served, so its cost per request reads low)
perflearn export memcached-profile -s "$store" -o /tmp/perflearn-manage-profile.csv
python3 -c "
import pandas as pd
d = pd.read_csv('/tmp/perflearn-manage-profile.csv')
busy = d.service_cpu / (d.wire_requests / d.wire_rps * d.quota)  # of the quota, over the capture
d[busy < 0.85][['cores', 'quota', 'rate', 'cpu_us_per_request']].to_csv('/tmp/perflearn-manage-cost.csv', index=False)"
perflearn fit --csv /tmp/perflearn-manage-cost.csv -t cpu_us_per_request -f cores,quota,rate --context-cols rate \
    --family rf --log-target yes -o /tmp/perflearn-manage-cost.model

perflearn manage --service "$service" --cores 2 --levels "$levels" --max-rps "$max_rps" --target-ms "$target_ms" \
    --model /tmp/perflearn-manage-p95.model --cost-model /tmp/perflearn-manage-cost.model --step-seconds "$step" --store "$store" --power "$power" \
    --load-args "--value-size fixed:4096" --figure bench/manage_live.png --csv /tmp/perflearn-manage-live.csv
