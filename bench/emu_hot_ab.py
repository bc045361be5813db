"""A/B: the delay-line helper's hot polling (default) against none (PERFLEARN_EMU_HOT=0),
on the TCP ping-pong's added latency at 2 and 10 us, 7 interleaved runs each.

    python bench/emu_hot_ab.py        # needs `make -C native/emu build`; root for PM QoS
"""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emu_accuracy as ea  # noqa: E402  (its neighbour in bench/)

VARIANTS = {"default": {}, "hot0": {"hot": "0"}}


def main() -> None:
    qos = ea.PmQos(True)
    lib = ea.lib("tcp")
    try:
        for kind in ("tcp", "tcp-poll"):
            for lat in ("2us", "10us"):
                added = {name: [] for name in VARIANTS}
                for _ in range(7):  # A and B alternate, so drift hits both
                    for name, extra in VARIANTS.items():
                        added[name].append(ea.added_once(kind, lib, {"latency": lat, **extra}))
                target = float(lat[:-2])
                print(kind, lat, {name: f"{statistics.median(v):+.3f} us ({(statistics.median(v) - target) / target * 100:+.1f}%)"
                                  for name, v in added.items()}, flush=True)
    finally:
        qos.close()


if __name__ == "__main__":
    main()
