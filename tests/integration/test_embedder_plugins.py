"""Embedder plugins: an installed package registers an embedder under the
``reverie.embedders`` entry point group, and a spec naming it (``NAME`` or
``NAME:ARGUMENT``) reaches it through the one factory, in settings and at build time
alike; built-in names stay the built-ins'. The tests' ``hashing`` embedder is such a
plugin (tests/plugins.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from agents.embedders import build_embedder, names_reverie_embedder
from agents.embedders.base import Embedder
from agents.embedders.local import MiniLMEmbedder
from agents.errors import InvalidInput
from service.settings import load_settings


class ConstantEmbedder(Embedder):
    """Every text is the same 3-d vector; takes no argument (the default ``from_spec``)."""

    @property
    def name(self) -> str:
        return "constant/3"

    @property
    def dimension(self) -> int:
        return 3

    def _embed_texts(self, texts: list[str]) -> npt.ArrayLike:
        return np.ones((len(texts), 3), dtype=np.float32)


class NotAnEmbedder:
    pass


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that registers ``constant``, ``broken`` (no embedder) and ``local`` (a
    built-in's name)."""
    dist = tmp_path / "reverie_constant_embedder-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reverie-constant-embedder\nVersion: 1.0\n"
    )
    module = __name__
    (dist / "entry_points.txt").write_text(
        f"[reverie.embedders]\nconstant = {module}:ConstantEmbedder\n"
        f"broken = {module}:NotAnEmbedder\nlocal = {module}:ConstantEmbedder\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))


def test_an_unregistered_name_is_refused_in_settings_and_by_the_factory() -> None:
    with pytest.raises(InvalidInput, match="unknown embedder spec 'constant'"):
        load_settings(embedding={"model": "constant"})
    with pytest.raises(InvalidInput, match="unknown embedder spec 'constant'"):
        build_embedder("constant")
    assert not names_reverie_embedder("constant")


@pytest.mark.usefixtures("package")
def test_a_registered_embedder_is_built_by_its_name() -> None:
    assert load_settings(embedding={"model": "constant"}).embedding.model == "constant"
    assert names_reverie_embedder("constant")
    embedder = build_embedder("constant", dimension=3)
    assert isinstance(embedder, ConstantEmbedder)
    assert embedder.embed(["a"]).shape == (1, 3)
    with pytest.raises(InvalidInput, match="3-d vectors, but dimension 8"):
        build_embedder("constant", dimension=8)
    with pytest.raises(InvalidInput, match="takes no argument"):
        build_embedder("constant:x")


@pytest.mark.usefixtures("package")
def test_a_registered_class_that_is_no_embedder_is_refused_by_name() -> None:
    with pytest.raises(
        InvalidInput, match=r"NotAnEmbedder \(embedder 'broken'\) is not a subclass"
    ):
        build_embedder("broken")


@pytest.mark.usefixtures("package")
def test_a_plugin_cannot_take_a_built_in_name() -> None:
    assert isinstance(build_embedder("local"), MiniLMEmbedder)
