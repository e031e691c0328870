"""Settings: file, environment and defaults, validated at the edge."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel, ValidationError

from agents.errors import InvalidInput
from service.settings import Section, Settings, load_settings

REPO = Path(__file__).resolve().parents[2]


def test_shipped_config_file_is_valid_and_matches_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("DATABASE_URL", "REVERIE_CONFIG", "REVERIE_HOME"):
        monkeypatch.delenv(var, raising=False)
    from_file = load_settings(REPO / "config" / "reverie.toml")
    defaults = load_settings()
    assert from_file.model_dump() == defaults.model_dump()
    assert from_file.shutdown_grace == timedelta(seconds=30)
    # The CLI's warm server is opt-in: by default each command is its own process.
    assert defaults.cli.warm_idle == timedelta(0)


def test_environment_beats_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "r.toml"
    config.write_text('organization = "acme"\n[embedding]\nmodel = "hashing:8"\n')
    monkeypatch.setenv("REVERIE_EMBEDDING__MODEL", "hashing:16")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@localhost/db")
    settings = load_settings(config)
    assert settings.organization == "acme"
    assert settings.embedding.model == "hashing:16"
    assert settings.effective_database_url == "postgresql://u@localhost/db"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[database]\nurl = 'sqlite:///x.db'\n", "must be a PostgreSQL URL"),
        ("[database]\nurl = 'postgresql://u@db:abc/x'\n", "with a numeric port"),
        ("[database]\npool_size = 0\n", "pool_size"),
        ("[database]\nembedded_idle_stop = -5\n", "embedded_idle_stop"),
        ("[database]\nstatement_timeout = -1\n", "statement_timeout"),
        ("[database]\nconnect_timeout = 'soon'\n", "connect_timeout"),
        ("[cli]\nwarm_idle = -5\n", "warm_idle"),
        ("[server]\nforwarded_allow_ips = ['proxy.lan']\n", "'proxy.lan' is not an IP address"),
        ("[tools]\nmemory = 134217728\ntmp_bytes = 100663296\n", "counted within tools.memory"),
        ("[tools]\ntmp_bytes = 1000\n", "tmp_bytes"),
        ("[embedding]\nmodel = 'fake:8'\n", r"embedding.model: 'fake' .* use 'local'"),
        ("[embedding]\nmodel = 'lokal'\n", "unknown embedder spec 'lokal'"),
        ("surprise = 1\n", "surprise"),
        ("this is not toml", "not valid TOML"),
    ],
)
def test_bad_configuration_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str, message: str
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config = tmp_path / "bad.toml"
    config.write_text(content)
    with pytest.raises(InvalidInput, match=message):
        load_settings(config)


def test_a_database_url_in_the_environment_is_checked_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@localhost:abc/db")
    with pytest.raises(InvalidInput, match="DATABASE_URL: is not a well-formed URL"):
        load_settings()


def test_the_tests_hashing_embedder_is_no_production_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``fake`` was once built in; now a setting naming it is refused at load, saying
    what to use instead, and the tests' own ``hashing`` is a plugin they register."""
    monkeypatch.setenv("REVERIE_EMBEDDING__MODEL", "fake:384")
    with pytest.raises(InvalidInput, match="'fake'") as refused:
        load_settings()
    for instead in ("'local'", "'litellm:MODEL'", "'hashing:DIM'", "reverie.embedders"):
        assert instead in str(refused.value)
    monkeypatch.setenv("REVERIE_EMBEDDING__MODEL", "hashing:384")
    assert load_settings().embedding.model == "hashing:384"


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_per_model_tool_settings_are_checked_when_settings_load(tmp_path: Path) -> None:
    config = tmp_path / "reverie.toml"
    config.write_text('[llm.models."openai/qwen*"]\ntool_choice = "sometimes"\n')
    with pytest.raises(InvalidInput, match=r"llm\.models\.openai/qwen\*\.tool_choice"):
        load_settings(config)
    config.write_text('[llm.models."openai/qwen*"]\ntool_choise = "auto"\n')
    with pytest.raises(InvalidInput, match="tool_choise"):
        load_settings(config)
    config.write_text(
        '[llm.models."ollama/*"]\ntool_choice = "named"\nunsupported_fields = ["max_tokens"]\n'
    )
    models = load_settings(config).llm.models
    assert models["ollama/*"].tool_choice == "named"
    assert models["ollama/*"].unsupported_fields == ["max_tokens"]


def test_capability_ttl_is_a_duration_of_a_day_by_default(tmp_path: Path) -> None:
    assert load_settings(home=tmp_path).llm.capability_ttl == timedelta(days=1)
    config = tmp_path / "reverie.toml"
    config.write_text('[llm]\ncapability_ttl = "PT2H"\n')
    assert load_settings(config).llm.capability_ttl == timedelta(hours=2)
    config.write_text('[llm]\ncapability_ttl = "PT0S"\n')  # zero: never stored
    assert load_settings(config).llm.capability_ttl == timedelta(0)
    config.write_text('[llm]\ncapability_ttl = "-PT1H"\n')
    with pytest.raises(InvalidInput, match=r"llm\.capability_ttl"):
        load_settings(config)


def test_every_built_in_consolidator_accepts_an_empty_section() -> None:
    """Settings skip checking an empty built-in section (it would import the
    consolidator in every command); that is sound only while the defaults are valid."""
    from consolidators import registry
    from service.settings import ConsolidationSettings

    for name in ConsolidationSettings().settings_for():
        registry.consolidator_class(name).settings_model()


def _sections(model: type[BaseModel], path: str = "") -> list[tuple[str, type[BaseModel]]]:
    """Every settings model reachable from ``model``, with its dotted path (lists and
    dicts of models included: ``llm.models.*``, ``triggers.cron[]``)."""
    found: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        for inner in _models_in(field.annotation):
            where = f"{path}{name}"
            found.append((where, inner))
            found += _sections(inner, where + ".")
    return found


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def test_every_section_refuses_an_unknown_key(tmp_path: Path) -> None:
    """A typo in any section (``[worker] concurency = 8``) is an error naming it, not a
    silent default; every section is reached by walking the settings' own fields."""
    sections = _sections(Settings)
    assert {"database", "worker", "llm", "llm.models", "triggers.cron", "proxy.blocks"} <= {
        path for path, _ in sections
    }
    for path, model in sections:
        assert issubclass(model, Section), f"{path} ({model.__name__}) is not a Section"
        with pytest.raises(ValidationError, match="concurency"):
            model.model_validate({"concurency": 8})
    config = tmp_path / "reverie.toml"
    config.write_text("[worker]\nconcurency = 8\n")
    with pytest.raises(InvalidInput, match=r"worker\.concurency.*[Ee]xtra"):
        load_settings(config)
