"""Command-line interface: one Typer app; the only place that prints or exits.

Each area registers its commands in its own module here (core.py, learn.py,
wire.py, ...), all on the one ``app`` of ``app.py``.
"""

from __future__ import annotations

import importlib
import importlib.util

from .app import app

# Areas are imported for the commands they register on ``app``.
_AREAS = ("core", "learn", "wire", "emulate", "detect", "manage")

for _area in _AREAS:
    if importlib.util.find_spec(f"{__name__}.{_area}") is not None:
        importlib.import_module(f"{__name__}.{_area}")


def main() -> None:
    try:
        app(prog_name="perflearn")
    except KeyboardInterrupt:  # before a command started (e.g. while importing)
        raise SystemExit(130) from None
