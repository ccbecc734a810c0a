"""Writes fenced by a lease: the Store as a sweep sees it while its replica holds a lease.

`FencedStore(store, lease)` passes reads straight through; before every write it asks
`holds_lease` with the epoch the lease was taken at, and refuses with `LeaseLost` once
another replica holds it (or it has lapsed), so a holder that stalled past its lease,
then woke up, cannot write over the work of the replica that took over.

The check is made `margin` seconds ahead (a write that starts with less than that left
on the lease is refused): the holder renews every ttl/3, so a live holder always has
more than that, and a write begun in time finishes well before the lease could pass on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .errors import LeaseLost

if TYPE_CHECKING:
    from .base import Store

# Store methods that write (the Store protocol's writers, lease methods aside).
_WRITE_PREFIXES = ("write_", "put_", "add_", "remove_", "set_", "delete_", "claim_", "take_over_", "finish_",
                   "fail_", "record_", "save_", "unsave_", "forget_", "reapply_", "update_", "mark_", "clear_",
                   "skip_", "unskip_", "move_")
_UNFENCED = {"claim_event", "set_meta"}  # dedupe records and heartbeats are per replica, not per lease


def is_write(name: str) -> bool:
    return name.startswith(_WRITE_PREFIXES) and name not in _UNFENCED


@dataclass(frozen=True)
class Lease:
    """A lease as held: its name, the holder and the epoch it was acquired at."""

    name: str
    holder: str
    epoch: int
    ttl: float


class FencedStore:
    """The store, with every write checked against `lease` (`now()` gives epoch seconds)."""

    def __init__(self, store: Store, lease: Lease, now: Callable[[], float], *, margin: float | None = None):
        self._store, self._lease, self._now = store, lease, now
        self._margin = lease.ttl / 6 if margin is None else margin

    @property
    def lease(self) -> Lease:
        return self._lease

    def check(self) -> None:
        """Raise LeaseLost unless the lease is still ours at its epoch, with the margin to spare."""
        lease = self._lease
        if not self._store.holds_lease(lease.name, holder=lease.holder, epoch=lease.epoch,
                                       now=self._now() + self._margin):
            raise LeaseLost(f"the {lease.name} lease (epoch {lease.epoch}) is no longer held by {lease.holder}")

    def __getattr__(self, name: str):
        value = getattr(self._store, name)
        if not is_write(name) or not callable(value):
            return value

        def fenced(*args, **kwargs):
            self.check()
            return value(*args, **kwargs)
        fenced.__name__ = name
        return fenced
