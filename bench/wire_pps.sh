#!/usr/bin/env bash
# Packets/s processed from a pcap file on one core: perflearn-sniff vs tshark -r vs tcpdump -r.
# Records a memcached (binary protocol) capture of >= MIN_PACKETS on loopback with tcpdump
# while perflearn-load drives memcached, then times each reader RUNS times on that file
# (pinned to one CPU) and prints a Markdown table of medians. The capture is not kept,
# unless WIRE_PCAP names a file: recorded there if absent, reused if present.
# Usage: [WIRE_PCAP=/tmp/mc.pcap] bench/wire_pps.sh [MIN_PACKETS=5000000] [RUNS=3]
#        (root; make -C native/wire build)
set -euo pipefail
MIN_PACKETS=${1:-5000000}
RUNS=${2:-3}
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${PERFLEARN_WIRE_BIN:-$root/native/wire/target/release}"
cpu=${BENCH_CPU:-1}
work=$(mktemp -d /tmp/wire-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

pcap="${WIRE_PCAP:-$work/mc.pcap}"
record() {
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 -t 1 -m 256 & pids+=($!)
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
  : > "$work/tcpdump.err"
  tcpdump -i lo -U -B 262144 -w "$pcap" "tcp port $port" 2>"$work/tcpdump.err" & tcpdump_pid=$!
  pids+=($tcpdump_pid)
  for _ in $(seq 100); do grep -q "listening on" "$work/tcpdump.err" && break; sleep 0.05; done
  # About two packets per request on loopback: keep loading until the capture is big enough.
  packets=0
  while [ "$packets" -lt "$MIN_PACKETS" ]; do
    "$bin/perflearn-load" -s "127.0.0.1:$port" -p memcache-binary -r 60000 -d 10 -c 32 -t 2 --keys 100000 \
      --set-ratio 0.1 --interval 10 > "$work/load.jsonl"
    packets=$("$bin/perflearn-sniff" -r "$pcap" --intervals none 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["counters"]["frames"])' || echo 0)
  done
  sleep 0.5
  kill -INT $tcpdump_pid; wait $tcpdump_pid 2>/dev/null || true
}
if [ -s "$pcap" ]; then
  packets=$("$bin/perflearn-sniff" -r "$pcap" --intervals none | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["counters"]["frames"])')
else
  record
fi
size=$(du -h "$pcap" | cut -f1)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# CPU seconds (user+sys) and wall seconds of one run, pinned to one CPU. On a shared
# machine wall time includes waiting for the CPU; CPU time is what one core spent.
one_run() {
  /usr/bin/time -f "%U %S %e" -o "$work/time.txt" taskset -c "$cpu" "$@" > /dev/null 2>&1
  awk '{printf "%.3f %.3f\n", $1 + $2, $3}' "$work/time.txt"
}
time_runs() {  # command... -> "cpu_median wall_median"
  for _ in $(seq "$RUNS"); do one_run "$@"; done > "$work/runs.txt"
  echo "$(cut -d' ' -f1 "$work/runs.txt" | median) $(cut -d' ' -f2 "$work/runs.txt" | median)"
}
read -r sniff_cpu sniff_wall <<<"$(time_runs "$bin/perflearn-sniff" -r "$pcap" --intervals none)"
read -r tcpdump_cpu tcpdump_wall <<<"$(time_runs tcpdump -n -r "$pcap")"
read -r tshark_cpu tshark_wall <<<"$(time_runs tshark -n -r "$pcap")"
summary=$("$bin/perflearn-sniff" -r "$pcap" --intervals none)
requests=$(echo "$summary" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["requests"])')

row() {  # name cpu wall
  printf '| %s | %.2f | %.0f | %.1fx | %.2f | %.0f |\n' "$1" "$2" "$(echo "$packets / $2" | bc -l)" \
    "$(echo "$tshark_cpu / $2" | bc -l)" "$3" "$(echo "$packets / $3" | bc -l)"
}
echo "Capture: $packets packets ($size) of memcached binary traffic recorded on loopback; $requests requests matched."
echo "Median of $RUNS runs, each pinned to one CPU (taskset -c $cpu); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| reader | CPU s | packets/CPU-s | vs tshark (CPU) | wall s | packets/wall-s |"
echo "|---|---|---|---|---|---|"
row "perflearn-sniff -r (per-request latency, matching, histograms)" "$sniff_cpu" "$sniff_wall"
row "tcpdump -n -r (one line per packet)" "$tcpdump_cpu" "$tcpdump_wall"
row "tshark -n -r (dissect, one line per packet)" "$tshark_cpu" "$tshark_wall"
echo
echo "Reproduce: sudo bench/wire_pps.sh $MIN_PACKETS $RUNS"
