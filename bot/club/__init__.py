"""The reading group in Slack: commands and the modal (commands.py), scheduled posts and DMs (posts.py),
its history, exports and map (reports.py)."""
from .commands import SUBCOMMANDS, nominate_paper, register
from .posts import STEPS, club_tick, dm_presenter, post_agenda
from .reports import MAP_SIZE

__all__ = ["MAP_SIZE", "STEPS", "SUBCOMMANDS", "club_tick", "dm_presenter", "nominate_paper", "post_agenda", "register"]
