"""A/B: the delay-line helper's hot polling (default) against none (PERFLEARN_EMU_HOT=0),
on the TCP ping-pong's added latency at 2 and 10 us, 7 interleaved runs each.

    python bench/emu_hot_ab.py        # needs `make -C native/emu build`; root for PM QoS
"""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emu_accuracy as ea
qos = ea.PmQos(True)
L = ea.lib('tcp')
for kind in ('tcp', 'tcp-poll'):
    for lat in ('2us', '10us'):
        res = {'default': [], 'hot0': []}
        for _ in range(7):
            for name, extra in (('default', {}), ('hot0', {'hot': '0'})):
                b = ea.run(ea.lat_cmd(kind), {}, L)[8]
                e = ea.run(ea.lat_cmd(kind), {'latency': lat, **extra}, L)[8]
                res[name].append(e - b)
        t = float(lat[:-2])
        print(kind, lat, {k: f"{statistics.median(v):+.3f} us ({(statistics.median(v)-t)/t*100:+.1f}%)" for k, v in res.items()}, flush=True)
qos.close()
