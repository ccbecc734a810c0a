"""The one place that reads the environment (and `.env`)."""
from __future__ import annotations

import os
import re
from typing import Mapping

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


SOCKET_MODES = ("builtin", "websocket_client")  # bot/runner.socket_mode_handler


def _env(name: str, **kw):
    return Field(validation_alias=AliasChoices(name), **kw)


class LogSettings(BaseSettings):
    """How paperclub logs: read on their own too, so a bad setting elsewhere is logged as asked."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore",
                                      populate_by_name=True)

    log_level: str = _env("LOG_LEVEL", default="INFO")
    log_format: str = _env("LOG_FORMAT", default="text")


class Settings(LogSettings):
    """Every setting paperclub reads; `.env.example` documents each."""

    db: str = _env("PAPERCLUB_DB", default="./paperclub.db")
    # How long `paperclub run` waits for a PostgreSQL server that does not answer yet (a
    # database container still starting), and then for another replica's schema migration,
    # before it gives up.
    db_wait_seconds: float = _env("PAPERCLUB_DB_WAIT_SECONDS", default=60.0, ge=0)
    model: str = _env("PAPERCLUB_MODEL", default="all-MiniLM-L6-v2")
    embed_bf16: str = _env("PAPERCLUB_EMBED_BF16", default="auto")
    # Search queries through ONNX Runtime ("onnx", falling back to torch when it cannot) or "torch".
    query_encoder: str = _env("PAPERCLUB_QUERY_ENCODER", default="onnx")
    # Where the model's exported ONNX graph is kept (default: $XDG_CACHE_HOME/paperclub/onnx).
    onnx_dir: str | None = _env("PAPERCLUB_ONNX_DIR", default=None)
    xdg_cache_home: str | None = _env("XDG_CACHE_HOME", default=None)
    # Dense search (store/vectors.py): exact up to this many vectors, an HNSW graph beyond; the
    # graph is saved at this path (if set) so a restart loads it instead of building it again.
    exact_limit: int = _env("PAPERCLUB_EXACT_LIMIT", default=200_000, gt=0)
    index_cache: str | None = _env("PAPERCLUB_INDEX_CACHE", default=None)
    # How the graph holds vectors in memory: i8 or f16 (twice the memory); its hits are
    # re-ranked by the stored float32 vectors either way.
    graph_dtype: str = _env("PAPERCLUB_GRAPH_DTYPE", default="i8", pattern="^(i8|f16)$")
    slack_bot_token: SecretStr | None = _env("SLACK_BOT_TOKEN", default=None)
    slack_app_token: SecretStr | None = _env("SLACK_APP_TOKEN", default=None)
    slack_api_url: str = _env("SLACK_API_URL", default="https://slack.com/api/")
    # slack_sdk's Socket Mode client: "builtin" or "websocket_client" (needs the websocket-client package).
    socket_mode: str = _env("PAPERCLUB_SOCKET_MODE", default="builtin")
    command: str = _env("PAPERCLUB_COMMAND", default="/paper")
    timezone: str = _env("PAPERCLUB_TIMEZONE", default="UTC")
    catch_up_hours: float = _env("PAPERCLUB_CATCH_UP_HOURS", default=3.0, ge=0)
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
        if not re.match(r"https?://[^/\s]+", v.strip()):
            raise ValueError("SLACK_API_URL must be a URL such as https://slack.com/api/ "
                             "(GovSlack: https://slack-gov.com/api/)")
        v = v.strip()
        return v if v.endswith("/") else v + "/"

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        from store.schedule import ScheduleError, check_timezone

        try:  # a typo would otherwise put every channel without its own zone on UTC, silently
            return check_timezone(v or "UTC")
        except ScheduleError as e:
            raise ValueError(str(e)) from None

    @field_validator("query_encoder")
    @classmethod
    def _query_encoder(cls, v: str) -> str:
        from store.embed import QUERY_ENCODERS

        v = v.strip().lower()
        if v not in QUERY_ENCODERS:
            raise ValueError(f"PAPERCLUB_QUERY_ENCODER must be one of {', '.join(QUERY_ENCODERS)}, not {v!r}")
        return v

    @field_validator("socket_mode")
    @classmethod
    def _socket_mode(cls, v: str) -> str:
        v = v.strip().lower()
        if v not in SOCKET_MODES:
            raise ValueError(f"PAPERCLUB_SOCKET_MODE must be one of {', '.join(SOCKET_MODES)}, not {v!r}")
        if v == "websocket_client":
            try:
                import websocket  # noqa: F401
            except ImportError:
                raise ValueError("PAPERCLUB_SOCKET_MODE=websocket_client needs the websocket-client package "
                                 "(pip install websocket-client)") from None
        return v

    @field_validator("slack_bot_token", "slack_app_token", "llm_api_key", "replica_id", mode="before")
    @classmethod
    def _blank_is_none(cls, v):
        return v or None

    @field_validator("slack_bot_token", "slack_app_token", "llm_api_key", mode="before")
    @classmethod
    def _bare_token(cls, v):
        # No token holds quotes or spaces: `docker run --env-file` keeps a .env line's quotes as
        # part of the value, and a copy from a browser can bring a space; either made Slack
        # refuse a right token (or the start call an xoxb- token "not a bot token").
        return v.strip().strip("\"'").strip() or None if isinstance(v, str) else v

    @field_validator("reaction_weights")
    @classmethod
    def _weights(cls, v: str) -> str:
        from store.feedback import parse_weights

        parse_weights(v)  # a typo fails at start-up with the entry named, not silently at the first reaction
        return v

    @property
    def onnx_cache_dir(self) -> str:
        if self.onnx_dir:
            return self.onnx_dir
        base = self.xdg_cache_home or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "paperclub", "onnx")

    @property
    def has_slack_tokens(self) -> bool:
        return bool(self.slack_bot_token and self.slack_app_token)

    def token_problem(self) -> str | None:
        """What is wrong with the two Slack tokens' kinds (swapped, or the wrong kind), or None.

        Names the variables and the prefixes only, never a token.
        """
        def value(token) -> str:
            return token.get_secret_value() if hasattr(token, "get_secret_value") else (token or "")

        bot, app = value(self.slack_bot_token), value(self.slack_app_token)
        if bot.startswith("xapp-") and app.startswith("xox"):
            return ("SLACK_BOT_TOKEN and SLACK_APP_TOKEN are swapped (environment or .env): the bot "
                    "token starts with xoxb-, the app-level token with xapp-.")
        if bot and not bot.startswith("xoxb-"):
            return ("SLACK_BOT_TOKEN is not a bot token: it starts with xoxb- (Install App → Bot User "
                    "OAuth Token).")
        if app and not app.startswith("xapp-"):
            return ("SLACK_APP_TOKEN is not an app-level token: it starts with xapp- (Basic "
                    "Information → App-Level Tokens, scope connections:write).")
        return None

    @property
    def admin_ids(self) -> set[str]:
        # Commas, semicolons or spaces between ids, and pasted mentions (<@U123|ann>) work too:
        # a list read as one unknown id would lock everyone out of schedules.
        ids = re.sub(r"<@(\w+)(?:\|[^>]*)?>", r" \1 ", self.admins)
        return {a for a in re.split(r"[\s,;]+", ids) if a}


class BadSetting(ValueError):
    """A setting in the environment or `.env` that cannot be used: one line naming it."""


def local_timezone(environ: Mapping[str, str] = os.environ, localtime: str = "/etc/localtime") -> str | None:
    """This machine's IANA zone, from TZ or else /etc/localtime's link target; None when it cannot be told."""
    from store.schedule import ScheduleError, check_timezone

    tz = environ.get("TZ", "").lstrip(":")
    if not tz or tz.startswith("/"):  # a file: its path names the zone (…/zoneinfo/Europe/Berlin)
        tz = os.path.realpath(tz or localtime).partition("/zoneinfo/")[2]
    try:
        return check_timezone(tz) if tz else None
    except ScheduleError:  # "EST5EDT"-style rules, or no zone database: no name to store
        return None


OUR_PREFIXES = ("PAPERCLUB_", "SLACK_", "LOG_")


def setting_names() -> list[str]:
    """Every variable name paperclub reads."""
    return [name for f in Settings.model_fields.values() for name in f.validation_alias.choices]


def unknown_settings(environ: Mapping[str, str] = os.environ, env_file: str = ".env") -> list[str]:
    """One line per variable meant for paperclub that it does not read, so ignores: PAPERCLUB_ADMIN
    for PAPERCLUB_ADMINS would otherwise leave everyone an admin without a word. In .env (which only
    paperclub reads) every PAPERCLUB_/SLACK_/LOG_ name counts; in the environment, which holds other
    programs' variables too, a name close to one of ours. Names only, never values."""
    import difflib

    from dotenv import dotenv_values

    known = setting_names()
    try:
        in_file = set(dotenv_values(env_file)) if os.path.isfile(env_file) else set()
    except (OSError, UnicodeDecodeError):
        in_file = set()  # pydantic-settings says what is wrong with the file itself
    lines = []
    for name in sorted(in_file | {n for n in environ if n.startswith(OUR_PREFIXES)}):
        if name in known:
            continue
        meant = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        where = "in .env" if name in in_file else "in the environment"
        if meant:
            lines.append(f"{name} ({where}) is not a paperclub setting and is ignored: did you mean {meant[0]}?")
        elif name in in_file and name.startswith(OUR_PREFIXES):
            lines.append(f"{name} ({where}) is not a paperclub setting and is ignored "
                         "(.env.example lists every setting).")
    return lines


def load_settings(**overrides) -> Settings:
    """The settings, or BadSetting naming each bad variable and why, in one line and without its
    value (pydantic's own report spans lines and quotes the input, which may sit beside a secret)."""
    try:
        return Settings(**overrides)
    except ValidationError as e:
        problems = []
        for err in e.errors(include_input=False, include_url=False):
            name = ".".join(str(part) for part in err["loc"]) or "a setting"
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(msg if msg.startswith(name) else f"{name}: {msg}")
        raise BadSetting(f"bad setting in the environment or .env: {'; '.join(problems)}") from None
