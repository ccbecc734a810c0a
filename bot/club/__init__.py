"""The reading group in Slack: commands and the modal (commands.py), scheduled posts and DMs (posts.py)."""
from .commands import MAP_SIZE, SUBCOMMANDS, register
from .posts import STEPS, club_tick, dm_presenter, post_agenda

__all__ = ["MAP_SIZE", "STEPS", "SUBCOMMANDS", "club_tick", "dm_presenter", "post_agenda", "register"]
