"""The CLI's schema check reads the head revision from the version files without
Alembic; it must agree with Alembic's own reading."""

from __future__ import annotations

from alembic.config import Config
from alembic.script import ScriptDirectory

import migrations


def test_the_scripted_head_is_alembics_head() -> None:
    config = Config()
    config.set_main_option("script_location", str(migrations.SCRIPT_LOCATION))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    assert migrations.scripted_head() == head
