"""Slow work off the ack path: `later(job, respond)` runs a job on the work pool, and a job that
fails is logged and answered with a short apology (report_error, also the app's error handler).
A member's write that meets a busy database is waited out there (`wait_out_busy`), not dropped; so is
one no reply can follow (a reaction) that meets a read-only database (a failover)."""
from __future__ import annotations

import logging
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, TypeVar

from store.errors import ReadOnlyStorage, StoreBusy

from .outgoing import ReplyNotDelivered

if TYPE_CHECKING:
    from .deps import Later

log = logging.getLogger(__name__)

SORRY = ("Sorry, something went wrong on my side while answering that. It has been logged; "
         "please try again in a minute.")
READ_ONLY = ("That can't be saved right now: the database only reads for the moment. It has been "
             "logged for whoever runs the bot; searching, summaries and your reading list still work. "
             "Please try this again later.")
WORK_THREADS = 16  # they mostly wait: on the batched encoder, SQLite, Slack
RETRY_DELAYS = (0.5, 1, 2, 4, 8, 15, 30, 60, 60, 60, 60)  # about 5 minutes of a locked database

T = TypeVar("T")


def report_error(error: BaseException, respond, logger: logging.Logger | None = None) -> None:
    """Log the failure (tokens are scrubbed by the log formatter) and say sorry, briefly; a write
    the database refused as read-only (a standby) is no bug: one line for the operator, and the
    member is told their change must wait."""
    read_only = isinstance(error, ReadOnlyStorage)
    (logger or log).error("listener failed: %s: %s", type(error).__name__, error,
                          exc_info=None if read_only else (type(error), error, error.__traceback__))
    if respond is None or isinstance(error, ReplyNotDelivered):  # the same way would fail again
        return
    try:
        respond(text=READ_ONLY if read_only else SORRY, response_type="ephemeral", replace_original=False)
    except Exception as e:  # the apology itself failed (response_url expired): logging is all we can do
        log.warning("could not tell the user about the error: %s", e)


def make_later(executor: Executor | None) -> Later:
    """later(job, respond=None): run `job` on `executor` (inline when None); a failure gets the apology."""
    def later(job: Callable[[], None], respond=None) -> None:
        def run():
            try:
                job()
            except Exception as e:
                report_error(e, respond)
        if executor is None:
            run()
        else:
            executor.submit(run)
    return later


def work_pool() -> ThreadPoolExecutor:
    """The pool `later` hands slow work to in production."""
    return ThreadPoolExecutor(max_workers=WORK_THREADS, thread_name_prefix="work")


def wait_out_busy(job: Callable[[], T], *, what: str, sleep: Callable[[float], None] = time.sleep,
                  no_reply: bool = False) -> T:
    """Run a write a member made (a reaction, a verdict, a form...), waiting out a busy database (a long
    backup, a big ingest, another replica's write) for minutes rather than dropping it; StoreBusy
    only once it stayed busy all that time. `what` names the write in the log. `no_reply`: work
    that cannot tell the member to try again (a reaction, a member leaving, a post already out)
    waits out a read-only database too (a standby while a failover ends), within the same time;
    otherwise ReadOnlyStorage goes at once to the member's friendly reply (report_error)."""
    waited = (StoreBusy, ReadOnlyStorage) if no_reply else (StoreBusy,)
    for attempt, delay in enumerate((*RETRY_DELAYS, None), start=1):
        try:
            return job()
        except waited as e:
            if delay is None:
                log.error("could not write %s after %d attempts: %s", what, attempt, e)
                raise
            state = "read-only" if isinstance(e, ReadOnlyStorage) else "busy"
            log.warning("database %s while writing %s (attempt %d); retrying in %s s", state, what, attempt, delay)
            sleep(delay)
    raise AssertionError("unreachable")
