#!/bin/bash
# Session 68 (2026-12-02): session 64's four policies, interleaved, on a grid of 16 speed levels
# (quota steps of 1/16 core) where every earlier round had 8: the seed's machine had 17 frequencies.
# Every policy runs on the same grid; the models are session 62's t models, fitted on its 8-level
# sweeps (a level between two profiled ones is forecast as the lower one).
# Usage: bash rounds.sh f P95.model COST.model 1 2 3   (the code of 00dd250: git archive, PYTHONPATH)
LEVELS=16 exec bash "$(dirname "$0")/../manage_live_s64/rounds.sh" "$@"
