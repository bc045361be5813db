#!/bin/bash
# Session 65 (2026-12-02): session 64's rounds (session 62's t models), interleaved with the
# hand-over, taken in turns m1 n1 m2 n2 (ABAB):
#   m: the code of f0be069 (session 64's);
#   n: the code of 5bacb68 (the cheapest rules idle at the most capacity within 1 % of the least power).
# Run each with its code (git archive REV src, then PYTHONPATH=DIR/src).
# Usage: bash rounds.sh m|n P95.model COST.model 1 2
exec bash "$(dirname "$0")/../manage_live_s64/rounds.sh" "$@"
