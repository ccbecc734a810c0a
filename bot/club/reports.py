"""The club's record, for `/paper club history | export | map`: past sessions, the reading list
as BibTeX and CSV, and a map of what the group has read."""
from __future__ import annotations

import re
from datetime import date
from typing import TYPE_CHECKING

from store import club_export as ex

from .. import blocks as bk
from ..blocks import code, mention
from ..commands import Reply

if TYPE_CHECKING:
    from ..deps import Deps

HISTORY_LISTED = 15


def history_reply(deps: Deps, channel: str) -> Reply:
    """Past sessions: date, paper, presenter, votes, a link to the thread."""
    held = [r for r in deps.store.club_sessions(channel) if r["state"] == "held"]
    rows = held[-HISTORY_LISTED:]
    if not rows:
        return Reply("The club has no past sessions yet.", bk.message_blocks("The club has no past sessions yet."))
    lines = []
    for r in reversed(rows):
        paper = deps.store.get_paper(r["paper_id"]) if r["paper_id"] else None
        name = bk.esc(paper.short_name) if paper else "_a paper no longer in the library_"
        who = mention(r["presenter"]) if r["presenter"] else "_nobody_"
        thread = ""
        if r.get("thread_ts"):
            thread = " · " + bk.link(f"https://slack.com/archives/{channel}/p{r['thread_ts'].replace('.', '')}",
                                     "thread")
        lines.append(f"*{r['date']}* {name}, presented by {who} · {r.get('votes') or 0} votes{thread}")
    # Each session whole, in as many sections as it takes; and how many older ones are not listed.
    blocks = [bk.header("Reading group history"), *bk.line_sections(lines)]
    if len(held) > len(rows):
        older = len(held) - len(rows)
        blocks.append(bk.context(f"The last {len(rows)} of {len(held)} sessions; {older} older "
                                 f"{'one is' if older == 1 else 'ones are'} not listed here "
                                 f"({code(deps.command + ' club export')} has them all)."))
    return Reply("\n".join(lines), blocks)


def export_reply(deps: Deps, channel: str, user: str) -> Reply:
    """The club's reading list as BibTeX and CSV, uploaded to the channel (files_upload_v2)."""
    rows = ex.export_rows(deps.store, channel)
    if not rows:
        return Reply("The club has not read any papers yet, so there is nothing to export.")
    client = deps.slack
    if client is None:
        return Reply(f"{len(rows)} papers; exports are uploaded to Slack (not available in the console).")
    client.files_upload_v2(
        channel=channel, initial_comment=f"The reading group's reading list ({len(rows)} papers), for {mention(user)}",
        file_uploads=[{"content": ex.to_bibtex(rows).encode(), "filename": "reading-group.bib",
                       "title": "Reading group (BibTeX)"},
                      {"content": ex.to_csv(rows).encode(), "filename": "reading-group.csv",
                       "title": "Reading group (CSV)"}])
    return Reply(f"Uploaded the reading list ({len(rows)} papers) as BibTeX and CSV to this channel.")


MAP_SIZE = (1200, 900)  # pixels of the uploaded PNG
# Members' interests and papers' names are drawn as the text they are: never read as mathtext
# ('$x$'; an odd '$' raised) nor sent to LaTeX, whatever the host's matplotlibrc says.
PLAIN = {"parse_math": False, "usetex": False}


def _wrapped(text: str, width: int = 24, lines: int = 3) -> str:
    """A label on at most `lines` lines, broken between words (cut with … only past that)."""
    import textwrap

    out = textwrap.wrap(" ".join(str(text).split()), width) or [""]
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1].rstrip() + "…"
    return "\n".join(out)


def _day(iso: str) -> str:
    try:
        return date.fromisoformat(iso).strftime("%-d %b %Y")
    except ValueError:
        return iso


def render_map(points: ex.MapPoints, *, size: tuple[int, int] = MAP_SIZE) -> bytes:
    """The map as PNG bytes (matplotlib, Agg backend: no display needed): the sessions numbered
    and joined in the order the group read them, each with its date; interests as regions."""
    import io

    import matplotlib
    import matplotlib.patches

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    dpi = 100
    fig = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.01, right=0.99, top=0.94, bottom=0.01)  # the canvas is for the map
    every = [*points.daily, *((x, y) for _, x, y in points.sessions), *((x, y) for _, x, y in points.interests)]
    xs_all, ys_all = [x for x, _ in every], [y for _, y in every]
    x0, x1, y0, y1 = min(xs_all), max(xs_all), min(ys_all), max(ys_all)
    pad_x, pad_y = max((x1 - x0) * 0.18, 0.3), max((y1 - y0) * 0.12, 0.3)
    ax.set_xlim(x0 - pad_x, x1 + pad_x)  # room for the labels, which stay inside the frame
    ax.set_ylim(y0 - pad_y, y1 + pad_y)
    mid = (x0 + x1) / 2
    if points.daily:
        ax.scatter(*zip(*points.daily), s=12, alpha=0.25, color="grey", label="paper of the day")
    for label, x, y in points.interests:  # the channel's interest: a labelled region
        ax.add_patch(matplotlib.patches.Circle((x, y), 0.15, alpha=0.12, color="tab:orange"))
        ax.annotate(_wrapped(label, 24, 3), (x, y), fontsize=8, color="tab:orange", ha="center", va="center",
                    annotation_clip=False, **PLAIN)
    xs = [x for _, x, _ in points.sessions]
    ys = [y for _, _, y in points.sessions]
    if len(xs) > 1:  # the order the group read them in
        ax.plot(xs, ys, color="tab:blue", alpha=0.25, linewidth=1, zorder=1)
    ax.scatter(xs, ys, s=60, color="tab:blue", label="club sessions, in order", zorder=2)
    dates = points.dates or [""] * len(points.sessions)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # to measure each label where it would land
    placed = []  # the labels' boxes so far: a label moves until it overlaps none
    for n, ((label, x, y), when) in enumerate(zip(points.sessions, dates), start=1):
        ax.annotate(str(n), (x, y), fontsize=7, color="white", ha="center", va="center", zorder=3, **PLAIN)
        text = _wrapped(label, 28, 4) + (f"\n{_day(when)}" if when else "")
        lean = 1 if x <= mid else -1  # a label leans into the map, not off its edge
        for dx, dy in ((8, 0), (8, 22), (8, -22), (-8, 0), (8, 44), (8, -44), (-8, 30), (-8, -30)):
            line = {"arrowprops": {"arrowstyle": "-", "color": "grey", "lw": 0.5}} if dy else {}
            note = ax.annotate(text, (x, y), fontsize=9, xytext=(dx * lean, dy), textcoords="offset points",
                               ha="left" if dx * lean > 0 else "right", va="center", annotation_clip=False,
                               **line, **PLAIN)
            box = note.get_window_extent(renderer).expanded(1.05, 1.1)
            if not any(box.overlaps(other) for other in placed):
                break
            note.remove()
        else:
            note = ax.annotate(text, (x, y), fontsize=9, xytext=(8 * lean, 0), textcoords="offset points",
                               ha="left" if lean > 0 else "right", va="center", annotation_clip=False, **PLAIN)
            box = note.get_window_extent(renderer)
        placed.append(box)
    ax.set_title(f"What the reading group has read: {len(points.sessions)} sessions", fontsize=12)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(loc="lower right", fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def map_reply(deps: Deps, channel: str) -> Reply:
    """A picture of the club's reading history, uploaded to the channel."""
    points = ex.map_points(deps.store, channel, deps.searcher.embedder.name)
    if points is None:
        return Reply("The club has not read any papers yet, so there is nothing to map.")
    png = render_map(points)
    if deps.slack is None:  # the console: a file to open
        import tempfile
        from pathlib import Path

        path = Path(tempfile.gettempdir()) / f"paperclub-map-{re.sub(r'[^A-Za-z0-9_-]', '_', channel)}.png"
        path.write_bytes(png)
        return Reply(f"Wrote a map of the club's {len(points.sessions)} sessions to {path}")
    deps.slack.files_upload_v2(channel=channel, content=png, filename="reading-group-map.png",
                               title="Reading group map",
                               initial_comment=f"The reading group's {len(points.sessions)} sessions on one map")
    return Reply(f"Posted a map of the club's {len(points.sessions)} sessions to this channel.")
