#!/bin/sh
# One of five real workloads with a fixed amount of work, at a small or large input.
# Usage: workload.sh APP INPUT PORT   (APP: stream zstd fio sort redis; INPUT: small large)
set -e
app=$1 input=$2 port=$3
data=/var/tmp/perflearn-detect
case "$app" in
stream)  # a STREAM-like triad in numpy: memory bandwidth bound
    n=$([ "$input" = small ] && echo 4000000 || echo 16000000)
    reps=$([ "$input" = small ] && echo 200 || echo 50)
    python3 -c "
import numpy as np
a = np.ones($n); b = np.ones($n); c = np.ones($n)
for _ in range($reps):
    np.multiply(c, 3.0, out=a); np.add(a, b, out=a)
" ;;
zstd)
    level=$([ "$input" = small ] && echo 12 || echo 15)
    zstd -q -"$level" -T1 -c "$data/seq.txt" > /dev/null ;;
fio)
    bs=$([ "$input" = small ] && echo 4k || echo 64k)
    size=$([ "$input" = small ] && echo 96M || echo 1536M)
    fio --name=d --filename="$data/fio.dat" --size=256M --io_size="$size" --rw=randread --bs="$bs" \
        --ioengine=psync --direct=1 --output-format=terse > /dev/null ;;
sort)
    lines=$([ "$input" = small ] && echo 600000 || echo 1200000)
    for i in 1 2 3; do head -n "$lines" "$data/random.txt" | sort -S 64M > /dev/null; done ;;
redis)
    n=$([ "$input" = small ] && echo 200000 || echo 100000)
    size=$([ "$input" = small ] && echo 64 || echo 4096)
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > /dev/null &
    server=$!
    until redis-cli -p "$port" ping > /dev/null 2>&1; do sleep 0.02; done
    status=0
    redis-benchmark -p "$port" -n "$n" -d "$size" -t set,get -c 4 -q > /dev/null 2>&1 || status=$?
    kill "$server"; wait "$server" || true
    exit $status ;;
*)
    echo "unknown app $app" >&2; exit 2 ;;
esac
