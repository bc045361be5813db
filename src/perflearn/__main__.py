"""``python -m perflearn`` is the ``perflearn`` command."""

from perflearn.cli import main

main()
