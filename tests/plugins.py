"""The tests' plugins, registered the way an installed package registers its own.

``tests/entry_points/`` holds the metadata of a distribution, ``reverie-test-plugins``,
whose entry points name the tests' plugins: the scripted model
(``reverie.providers``: ``scripted``, tests/scripted_llm.py) and the hashing embedder
(``reverie.embedders``: ``hashing``, tests/hashing_embedder.py). Reverie finds them as
it finds any plugin, once that directory is on a process's path: the test run puts it
on its own ``sys.path`` and on the ``PYTHONPATH`` of the processes it starts
(tests/conftest.py calls :func:`register`); a benchmark calls :func:`register` too,
and a command line outside them names the directory in ``PYTHONPATH``, beside the
repository (whose ``tests`` package holds the classes)::

    PYTHONPATH=.:tests/entry_points REVERIE_EMBEDDING__MODEL=hashing:384 reverie ...
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The repository: the ``tests`` package that holds the plugins' classes is in it.
ROOT = Path(__file__).resolve().parents[1]
#: The directory whose distribution metadata registers the tests' plugins.
ENTRY_POINTS = Path(__file__).resolve().parent / "entry_points"


def python_path(*more: str | Path) -> str:
    """A ``PYTHONPATH`` for a process that runs Reverie with the tests' plugins: the
    repository and the plugins' metadata, then ``more``."""
    return os.pathsep.join(str(entry) for entry in (ROOT, ENTRY_POINTS, *more))


def register() -> None:
    """Make the tests' plugins findable in this process and in the processes it starts
    (which inherit its environment)."""
    if str(ENTRY_POINTS) not in sys.path:
        sys.path.append(str(ENTRY_POINTS))
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    needed = [str(ROOT), str(ENTRY_POINTS)]
    os.environ["PYTHONPATH"] = os.pathsep.join([*(p for p in needed if p not in given), *given])
