"""The one place that reads the environment (and `.env`)."""
from __future__ import annotations

import re

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _env(name: str, **kw):
    return Field(validation_alias=AliasChoices(name), **kw)


class Settings(BaseSettings):
    """Every setting paperclub reads; `.env.example` documents each."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore",
                                      populate_by_name=True)

    db: str = _env("PAPERCLUB_DB", default="./paperclub.db")
    model: str = _env("PAPERCLUB_MODEL", default="all-MiniLM-L6-v2")
    embed_bf16: str = _env("PAPERCLUB_EMBED_BF16", default="auto")
    slack_bot_token: SecretStr | None = _env("SLACK_BOT_TOKEN", default=None)
    slack_app_token: SecretStr | None = _env("SLACK_APP_TOKEN", default=None)
    slack_api_url: str = _env("SLACK_API_URL", default="https://slack.com/api/")
    command: str = _env("PAPERCLUB_COMMAND", default="/paper")
    timezone: str = _env("PAPERCLUB_TIMEZONE", default="UTC")
    catch_up_hours: float = _env("PAPERCLUB_CATCH_UP_HOURS", default=3.0)
    log_level: str = _env("LOG_LEVEL", default="INFO")
    log_format: str = _env("LOG_FORMAT", default="text")
    llm_url: str | None = _env("PAPERCLUB_LLM_URL", default=None)
    llm_model: str | None = _env("PAPERCLUB_LLM_MODEL", default=None)
    llm_api_key: SecretStr | None = _env("PAPERCLUB_LLM_API_KEY", default=None)
    admins: str = _env("PAPERCLUB_ADMINS", default="")
    reaction_weights: str = _env("PAPERCLUB_REACTION_WEIGHTS", default="")
    feedback_half_life_days: float = _env("PAPERCLUB_FEEDBACK_HALF_LIFE_DAYS", default=30.0, gt=0)
    # Several replicas on one PostgreSQL (README, Operations): who this process is, how long the sweeps'
    # lease lasts without a renewal (a dead holder's sweeps pass on after this), how often the sweep of
    # failed and orphaned posts runs.
    replica_id: str | None = _env("PAPERCLUB_REPLICA_ID", default=None)
    lease_seconds: float = _env("PAPERCLUB_LEASE_SECONDS", default=15.0, ge=1.0)
    sweep_seconds: float = _env("PAPERCLUB_SWEEP_SECONDS", default=600.0, ge=1.0)
    # Fresh papers (store/sources/): each service's base URL, so a mirror or a test's fake can stand in.
    arxiv_api: str = _env("PAPERCLUB_ARXIV_API", default="https://export.arxiv.org/api/query")
    arxiv_rss: str = _env("PAPERCLUB_ARXIV_RSS", default="https://rss.arxiv.org/rss/")
    openreview_api: str = _env("PAPERCLUB_OPENREVIEW_API", default="https://api2.openreview.net")

    @field_validator("slack_api_url")
    @classmethod
    def _slash(cls, v: str) -> str:
        return v if v.endswith("/") else v + "/"

    @field_validator("slack_bot_token", "slack_app_token", "llm_api_key", "replica_id", mode="before")
    @classmethod
    def _blank_is_none(cls, v):
        return v or None

    @field_validator("reaction_weights")
    @classmethod
    def _weights(cls, v: str) -> str:
        from store.feedback import parse_weights

        parse_weights(v)  # a typo fails at start-up with the entry named, not silently at the first reaction
        return v

    @property
    def has_slack_tokens(self) -> bool:
        return bool(self.slack_bot_token and self.slack_app_token)

    @property
    def admin_ids(self) -> set[str]:
        # Commas, semicolons or spaces between ids, and pasted mentions (<@U123|ann>) work too:
        # a list read as one unknown id would lock everyone out of schedules.
        ids = re.sub(r"<@(\w+)(?:\|[^>]*)?>", r" \1 ", self.admins)
        return {a for a in re.split(r"[\s,;]+", ids) if a}


def make_sources(settings: Settings, **kw):
    """The polite HTTP clients for arXiv and OpenReview at the configured base URLs."""
    from store.sources import Sources

    return Sources.create(arxiv_api=getattr(settings, "arxiv_api", None),
                          arxiv_rss=getattr(settings, "arxiv_rss", None),
                          openreview_api=getattr(settings, "openreview_api", None), **kw)


def load_settings(**overrides) -> Settings:
    return Settings(**overrides)
