"""What every settings section shares: the ``PORTALQ_`` prefix, the ``PORTALQ_CONFIG`` file
and the ``PORTALQ_SECRETS_DIR`` folder, read when a section is built (never at import)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, ClassVar

from pydantic_settings import BaseSettings, SettingsConfigDict

from portalq.jobs.files import check_secret_file

#: the two names read before any section: where the other settings may come from
CONFIG_ENV = "PORTALQ_CONFIG"
SECRETS_DIR_ENV = "PORTALQ_SECRETS_DIR"


def _check_secret_files(folder: Path) -> None:
    """The setting files of ``PORTALQ_SECRETS_DIR`` (``portalq_smtp_url`` with its
    password...): one others may read or change is refused (jobs.files.check_secret_file)."""
    try:
        entries = list(folder.glob("portalq_*"))
    except OSError:
        return   # pydantic says what is wrong with the folder itself
    for path in entries:
        try:
            st = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            check_secret_file(path, st, "secret file")


class Section(BaseSettings):
    """Settings from the environment, then the config file (``PORTALQ_CONFIG``), then files
    in ``PORTALQ_SECRETS_DIR`` (one file per setting, named ``portalq_<setting>``: secrets
    mounted as files), then the defaults. An empty variable counts as unset."""

    model_config = SettingsConfigDict(env_prefix="PORTALQ_", extra="ignore",
                                      hide_input_in_errors=True, env_ignore_empty=True)

    #: the heading of the section in docs/reference/settings.md
    title: ClassVar[str] = ""
    #: refuse secret files others may read or change -- in every process that reads its
    #: settings (the CLI, the console, an enqueuing application), not the service alone
    #: (issue 48: the others used such a file silently), as key files are refused
    check_secret_files: ClassVar[bool] = True

    def __init__(self, **values: Any) -> None:
        if "_env_file" not in values:
            values["_env_file"] = os.environ.get(CONFIG_ENV)
        folder = os.environ.get(SECRETS_DIR_ENV)
        if folder and "_secrets_dir" not in values:
            if self.check_secret_files:
                _check_secret_files(Path(folder))
            values["_secrets_dir"] = folder
        super().__init__(**values)

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Field name -> the variable that sets it (``PORTALQ_<FIELD>`` or its alias)."""
        prefix = cls.model_config.get("env_prefix", "")
        out = {}
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            out[name] = alias if isinstance(alias, str) else f"{prefix}{name}".upper()
        return out
