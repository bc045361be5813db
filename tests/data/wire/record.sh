#!/usr/bin/env bash
# Re-record the wire analyzer's golden capture on loopback and regenerate its expected
# outputs. Needs root (tcpdump), memcached, redis-server, tcpdump, tshark, editcap and a
# built perflearn-sniff. Usage: tests/data/wire/record.sh   (from the repository root)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
sniff="${PERFLEARN_WIRE_BIN:-$root/native/wire/target/release}/perflearn-sniff"
[ -x "$sniff" ] || { echo "record.sh: $sniff missing: run make -C native/wire build" >&2; exit 1; }
ports=$(python3 -c 'import socket
ps=[]
ss=[socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1",0)); ps.append(s.getsockname()[1])
print(*ps)')
read -r MC RD HT <<<"$ports"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

memcached -u "$(id -un)" -l 127.0.0.1 -p "$MC" -U 0 -t 1 -m 64 -I 2m & pids+=($!)
redis-server --port "$RD" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" >/dev/null & pids+=($!)
python3 "$here/servers.py" http "$HT" & pids+=($!)
for p in $MC $RD $HT; do
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.05; done
done
: > "$tmp/tcpdump.err"; tcpdump -i lo -U -s 0 -w "$tmp/golden.pcap" "tcp port $MC or tcp port $RD or tcp port $HT" 2>"$tmp/tcpdump.err" & tcpdump_pid=$!
pids+=($tcpdump_pid)
for _ in $(seq 100); do grep -q "listening on" "$tmp/tcpdump.err" && break; sleep 0.05; done
python3 "$here/servers.py" drive "$MC" "$RD" "$HT" > "$tmp/counts.json"
sleep 0.5
kill -INT $tcpdump_pid; wait $tcpdump_pid || true

cp "$tmp/golden.pcap" "$here/golden.pcap"
editcap -F pcapng "$here/golden.pcap" "$here/golden.pcapng"
python3 - "$MC" "$RD" "$HT" "$tmp/counts.json" "$here/golden.expected.json" <<'PY'
import json, sys
mc, rd, ht, counts, out = sys.argv[1:]
json.dump({"ports": {"memcache": int(mc), "redis": int(rd), "http": int(ht)},
           "responses": json.load(open(counts))}, open(out, "w"), indent=1, sort_keys=True)
PY
"$sniff" -r "$here/golden.pcap" --records "$here/golden.records.jsonl" --intervals none > "$here/golden.summary.json"
tshark -r "$here/golden.pcap" -d "tcp.port==$HT,http" -Y "http.response" \
  -T fields -e frame.number -e tcp.stream -e http.response.code -e http.time > "$here/golden.http_time.tsv"
echo "recorded: $(wc -l < "$here/golden.records.jsonl") records; client counts $(cat "$tmp/counts.json")"
