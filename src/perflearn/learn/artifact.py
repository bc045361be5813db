"""A fitted model on disk: a directory of pickles and one JSON file that describes them.

The JSON file is written last and removed first, so a fit killed while saving leaves a
directory that does not load ("no model.json"), never a new pickle described by the old
JSON. A directory that holds anything else is not written into: ``-o results`` would
otherwise mix a model into a folder of the user's files.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import joblib

from perflearn.errors import UsageError

PARTIAL = ".partial"  # a file being written; replaced into place once whole
CHECKSUMS = "files"  # the JSON's key: each pickle's sha256, so pickles of another fit are refused


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
    sums = {}
    for name, obj in pickles.items():
        joblib.dump(obj, directory / (name + PARTIAL))
        sums[name] = _sha256(directory / (name + PARTIAL))
        os.replace(directory / (name + PARTIAL), directory / name)
    meta = {**meta, CHECKSUMS: sums}
    (directory / (meta_name + PARTIAL)).write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(directory / (meta_name + PARTIAL), directory / meta_name)
    return directory


def check_files(directory: str | Path, meta: dict, meta_name: str) -> None:
    """Refuse (one line) a pickle that is not the one ``meta`` was written with: a
    directory whose files were copied from two fits (only the features were compared,
    so another fit's pipeline predicted under this one's name, unit and band). A
    directory written before the checksums were kept is not checked."""
    sums = meta.get(CHECKSUMS)
    if not isinstance(sums, dict):
        return
    for name, expected in sums.items():
        path = Path(directory) / name
        if path.is_file() and _sha256(path) != expected:
            raise UsageError(f"{name} is not the file {meta_name} describes (its checksum differs: damaged, or "
                             "copied from another fit); fit it again", where=str(directory))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
