#!/bin/bash
# Session 67 (2026-12-02), session 62's t models:
#   v: session 66's rounds (0.9 and 0.95 taking turns in each; the code of c9adc41):
#        bash bench/manage_live_s66/rounds.sh v P95.model COST.model 1 2 3
#   d: session 64's four policies with the code of b0ab3ba, where 0.95 is the default headroom:
#        bash bench/manage_live_s67/rounds.sh d P95.model COST.model 1
# Run each with its code (git archive REV src, then PYTHONPATH=DIR/src).
exec bash "$(dirname "$0")/../manage_live_s64/rounds.sh" "$@"
