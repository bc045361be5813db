#!/bin/sh
# The live comparison of bench/manage.md: real memcached (or Redis) on this machine, every policy
# on the same steps trace, one session. Run it on a quiet machine (nothing else busy):
#
#   sh bench/manage_live.sh [STORE] [STEP_SECONDS] [POWER] [LEVELS] [SERVICE]
#
# POWER: the power model the policies decide with and energy is reported under (server,
# the default, or tx1: the seed's proportionality; see docs/manage.md). Rerun on the
# same STORE, the knee is reused (--resume), and so is the sweep while its CSV is there
# (rm it to profile again); only the policies run again.
# LEVELS: speed levels per core, 4 (the default: quarters of a CPU) or 8 (eighths).
# SERVICE: memcached (the default; two threads on up to two cores) or redis (one thread,
# so one core: the speed level is then a quota on one CPU; bench/manage.md, session 38).
#
# 1. the knee of memcached's load-latency curve at maximum configuration -> QoS target
#    and maximum load (seed 4.1.3); 2. Heimdall's profile, measured by the manager
#    itself (`-p sweep --trace ladder`: every configuration it can run at 10-110 % of
#    the maximum load, 50 s a load, on one long-lived memcached; bench/manage.md,
#    session 23); 3. random forests of log p95 and of the CPU time per request from the
#    sweep's settled intervals against the offered rate (not the interval's measured
#    rate: bench/manage.md, session 16) and the host-speed probe (Heimdall plans for the
#    host of late: bench/manage.md, session 36); 4. every policy, taking turns on one memcached step by
#    step (--interleave: one host phase for all; bench/manage.md, session 34).
set -e
cd "$(dirname "$0")/.."
store=${1:-/tmp/perflearn-manage-live.duckdb}
step=${2:-20}
power=${3:-server}
levels=${4:-4}
name=${5:-memcached}
case $name in
    memcached) service="memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0" protocol=memcache-binary cores=2 tag= ;;
    redis) service="redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no" protocol=redis cores=1 tag=-redis ;;
    *) echo "SERVICE: memcached or redis, got $name" >&2; exit 2 ;;
esac
sweep=/tmp/perflearn-manage-sweep$tag-$levels.csv

perflearn run examples/$name-knee/spec.toml -s "$store" --resume -q
# a knee past a latency jump (this VM's memcached saturates within one step of the sweep)
# would put the maximum load where even the maximum configuration has no headroom
knee=$(perflearn knee $name-knee --x rate --y wire_p95 -s "$store" --before-jump)
echo "$knee"
target_us=$(echo "$knee" | sed -n 's/.*QoS target \([0-9.e+]*\),.*/\1/p')
max_rps=$(echo "$knee" | sed -n 's/.*maximum load \([0-9.e+]*\) .*/\1/p')
target_ms=$(python3 -c "print($target_us / 1000)")

common="--protocol $protocol --cores $cores --levels $levels --max-rps $max_rps --target-ms $target_ms --power $power"
[ -s "$sweep" ] || perflearn manage --service "$service" $common -p sweep --trace ladder --step-seconds 50 \
    --load-args "--value-size fixed:4096" --csv "$sweep"
# settled intervals (one configuration through them and the one before) inside their load step
steady="settled and abs(rps / offered_rps - 1) < 0.05 and host_probe_us > 0"
perflearn fit --csv "$sweep" --where "$steady and p95 > 0" -t p95 -f cores,level,offered_rps,host_probe_us \
    --context-cols offered_rps,host_probe_us --family rf --log-target yes -o /tmp/perflearn-manage$tag-p95.model
# the CPU time per request, from intervals that were not saturated (a saturated interval's
# CPU time is capped)
perflearn fit --csv "$sweep" --where "$steady and utilisation < 0.85" \
    -t cpu_us_per_request -f cores,level,offered_rps,host_probe_us --context-cols offered_rps,host_probe_us \
    --family rf --log-target yes -o /tmp/perflearn-manage$tag-cost.model

perflearn manage --service "$service" $common --model /tmp/perflearn-manage$tag-p95.model --model-unit s \
    --cost-model /tmp/perflearn-manage$tag-cost.model --step-seconds "$step" --store "$store" --interleave \
    --load-args "--value-size fixed:4096" --figure bench/manage_live$tag.png --csv /tmp/perflearn-manage-live$tag.csv
