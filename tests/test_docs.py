"""The docs say what the code does: every command, slash command and setting is documented,
and every default the docs (or .env.example) state is the one the code uses."""
from __future__ import annotations

import re
from pathlib import Path

import click

from bot.cli import cli
from bot.config import Settings
from bot.deps.build import command_table

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])


def cli_commands(group: click.Group = cli, prefix: str = "paperclub") -> dict[str, click.Command]:
    out = {}
    for name, command in group.commands.items():
        if command.hidden:
            continue
        if isinstance(command, click.Group):
            out.update(cli_commands(command, f"{prefix} {name}"))
        else:
            out[f"{prefix} {name}"] = command
    return out


def settings_env() -> dict[str, object]:
    """Each setting's environment variable -> its default in the code."""
    out = {}
    for field in Settings.model_fields.values():
        name = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
        if name:
            out[name] = field.default
    return out


def same_value(documented: str, default: object) -> bool:
    documented = documented.strip().strip("`")
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        try:
            return float(documented.replace("_", "")) == float(default)
        except ValueError:
            return False
    return documented == ("" if default is None else str(default))


def test_every_command_line_command_is_in_the_readme_table():
    missing = [name for name in cli_commands() if f"`{name}" not in README]
    assert not missing, f"add these to the README's Command line table: {missing}"


def test_every_slash_command_and_club_verb_is_in_the_readme():
    table = command_table()
    missing = [f"/paper {s.name}" for s in table.visible() if f"`/paper {s.name}" not in README]
    club = next(s for s in table.visible() if s.name == "club")
    club_rows = "\n".join(line for line in README.splitlines() if "/paper club" in line)
    verbs = re.findall(r"(?:club \[|\| )([a-z][a-z-]+)", club.usage)  # not a verb's own [zone]
    missing += [f"/paper club {v}" for v in verbs if f"`{v}" not in club_rows and f"club {v}" not in club_rows]
    assert not missing, f"add these to the README's Slack command table: {missing}"


def test_every_setting_is_documented():
    missing = [name for name in settings_env() if name not in DOCS]
    assert not missing, f"document these settings in docs/operations.md: {missing}"


def test_documented_setting_defaults_are_the_code_defaults():
    defaults = settings_env()
    wrong = []
    for name, value in re.findall(r"^([A-Z][A-Z0-9_]+)=(.*)$", (ROOT / ".env.example").read_text(), re.M):
        if name in defaults and value and not same_value(value, defaults[name]):
            wrong.append((".env.example", name, value, defaults[name]))
    for name, value in re.findall(r"`([A-Z][A-Z0-9_]+)`[^`(]{0,40}\(default `?([^`),;]+)`?", DOCS):
        if name in defaults and not same_value(value, defaults[name]):
            wrong.append(("docs", name, value, defaults[name]))
    assert not wrong, wrong


def test_documented_command_line_defaults_are_the_code_defaults():
    wrong = []
    for name, command in cli_commands().items():
        rows = [line for line in README.splitlines() if line.startswith(f"| `{name} ") or line.startswith(f"| `{name}`")]
        options = {p.opts[0]: p.default for p in command.params if isinstance(p, click.Option)}
        for row in rows:
            for option, value in re.findall(r"(--[a-z-]+)[^|]*?\(default (\S+?)\)", row):
                if option in options and not same_value(value, options[option]):
                    wrong.append((name, option, value, options[option]))
            for value in re.findall(r"\(default (\S+?)\)", row):  # a default named without its option
                if not any(same_value(value, d) for d in options.values()):
                    wrong.append((name, "?", value, options))
    assert not wrong, wrong


def test_the_troubleshooting_table_quotes_what_the_bot_says():
    """An operator searches the log for the quoted words: each must be what the code writes."""
    table = README.split("**Troubleshooting.**", 1)[1].split("\n\n", 2)[1]
    code = "\n".join(p.read_text() for p in (ROOT / "bot").rglob("*.py"))
    quoted = [q for row in table.splitlines()[2:] for q in re.findall(r'"([^"]+)"', re.sub(r"`[^`]*`", "", row.split("|")[1]))]  # `...`: what Slack shows
    assert quoted
    for q in quoted:
        for part in filter(None, (p.strip() for p in q.split("…"))):
            assert part in code, f"the README quotes {q!r}, which the bot never says"
