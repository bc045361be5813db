#!/bin/bash
# Session 63: the profile floor in the simulator (old = 600a489, new = eb0d729; run each with its code)
# on a host slow 35 % of the time, 10 seeds; then paired per seed: python bench/manage_sim_paired.py slow35_old.csv slow35_new.csv
perflearn manage --simulate --power tx1 --slow-host 0.35 --seeds 10 -p static -p heimdall-cheapest \
    -p heimdall-uncertain --csv slow35_$1.csv
