#!/bin/sh
# Functional tests of the socket shim (libfaketime style): run real programs
# under LD_PRELOAD and check what they deliver.  Usage: sh tests/functional.sh BUILD_DIR
B=${1:-build}
LIB=$(cd "$B" && pwd)/libperflearn_emu.so
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAILED: $1" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# 1. a bad value disables the library with exactly one line on stderr; the program still runs
out=$(PERFLEARN_EMU_LATENCY=-5us LD_PRELOAD=$LIB sh -c 'echo alive' 2>"$tmp/err")
[ "$out" = alive ] && ok || bad "program runs with a bad value"
n=$(grep -c 'perflearn-emu: PERFLEARN_EMU_LATENCY=-5us' "$tmp/err")
[ "$n" -ge 1 ] && ok || bad "bad value reported"
PERFLEARN_EMU_BANDWIDTH=fast LD_PRELOAD=$LIB /bin/true 2>"$tmp/err1"
[ "$(wc -l < "$tmp/err1")" -eq 1 ] && ok || bad "exactly one line for a bad value"

# 2. files, pipes and fork/exec untouched
head -c 300000 /dev/urandom > "$tmp/in"
PERFLEARN_EMU_LATENCY=50us PERFLEARN_EMU_BANDWIDTH=1Mbit LD_PRELOAD=$LIB \
  sh -c "cat '$tmp/in' | cat > '$tmp/out'; dd if='$tmp/in' of='$tmp/out2' bs=4096 2>/dev/null" 
cmp -s "$tmp/in" "$tmp/out" && ok || bad "pipe bytes unchanged"
cmp -s "$tmp/in" "$tmp/out2" && ok || bad "file bytes unchanged"
# 1 Mbit would take 2.4 s for 300 kB if pipes were paced
s=$(date +%s%N)
PERFLEARN_EMU_BANDWIDTH=1Mbit LD_PRELOAD=$LIB sh -c "cat '$tmp/in' > /dev/null"
e=$(( ($(date +%s%N) - s) / 1000000 ))
[ "$e" -lt 1500 ] && ok || bad "pipes not paced (took ${e} ms)"

# 3. checksummed TCP and UDP streams at several settings (fork inside)
for set in "0 0 0" "20us 0 0" "0 1us 0" "0 0 2Gbit" "30us 500ns 1Gbit"; do
  set -- $set
  if PERFLEARN_EMU_LATENCY=$1 PERFLEARN_EMU_OVERHEAD=$2 PERFLEARN_EMU_BANDWIDTH=$3 LD_PRELOAD=$LIB \
       timeout 120 "$B/emu_osu_tcp" check --bytes 4000000 > "$tmp/check" 2>&1; then ok
  else bad "checksummed streams at L=$1 o=$2 B=$3: $(cat "$tmp/check")"; fi
done

# 4. an unmatched peer filter leaves the socket alone (no messages emulated)
PERFLEARN_EMU_VERBOSE=1 PERFLEARN_EMU_LATENCY=1ms PERFLEARN_EMU_PEERS=10.9.9.9:1 LD_PRELOAD=$LIB \
  "$B/emu_osu_tcp" latency --min 1 --max 1 --iters 20 --warmup 0 > /dev/null 2>"$tmp/v"
grep -q "emulated 0 messages" "$tmp/v" && ok || bad "peer filter: $(cat "$tmp/v")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
