"""A fitted model on disk: a directory of pickles and one JSON file that describes them.

The JSON file is written last and removed first, so a fit killed while saving leaves a
directory that does not load ("no model.json"), never a new pickle described by the old
JSON. A directory that holds anything else is not written into: ``-o results`` would
otherwise mix a model into a folder of the user's files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import joblib

from perflearn.errors import UsageError

PARTIAL = ".partial"  # a file being written; replaced into place once whole


def check_destination(directory: str | Path, own: list[str], kind: str = "model") -> Path:
    """``directory`` if a model can be written there: missing, empty, or holding only the
    files ``own`` (a model of the same kind, to replace); else one line (UsageError). A
    command checks it before it fits, not after."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UsageError("exists and is not a directory", where=str(directory))
    if directory.is_dir():
        other = sorted(p.name for p in directory.iterdir() if p.name.removesuffix(PARTIAL) not in own)
        if other:
            raise UsageError(f"is a directory of other files ({', '.join(other[:3])}{', ...' if len(other) > 3 else ''}), "
                             f"not a {kind}'s; give a new or empty directory", where=str(directory))
    return directory


def write_artifact(directory: str | Path, pickles: dict[str, object], meta_name: str, meta: dict,
                   kind: str = "model") -> Path:
    """Write ``pickles`` (file name -> object) and then ``meta`` as ``meta_name`` into
    ``directory``, created if missing; refused (UsageError) where it is a file or holds
    files other than these."""
    directory = check_destination(directory, [*pickles, meta_name], kind)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / meta_name).unlink(missing_ok=True)
    for name, obj in pickles.items():
        joblib.dump(obj, directory / (name + PARTIAL))
        os.replace(directory / (name + PARTIAL), directory / name)
    (directory / (meta_name + PARTIAL)).write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(directory / (meta_name + PARTIAL), directory / meta_name)
    return directory
