#!/bin/sh
# Inputs of the detect workloads, made once (kept between experiments).
set -e
mkdir -p /var/tmp/perflearn-detect
cd /var/tmp/perflearn-detect
[ -s seq.txt ] || seq 1 4000000 > seq.txt
[ -s random.txt ] || python3 -c "import random; r = random.Random(1); print('\n'.join(str(r.random()) for _ in range(1200000)))" > random.txt
[ -s fio.dat ] || fio --name=layout --filename=fio.dat --size=256M --rw=write --bs=1M --direct=1 --output-format=terse > /dev/null
