"""forget-me and its re-apply after a restore, written once for both backends from the one list
of member columns (store.members.MEMBER_COLUMNS). A backend mixes this in (shared.py) and says
where it keeps the forgotten list (_remember_forgotten, forgotten_hashes, _merge_forgotten) and how
a row read for rewriting is locked (_FOR_UPDATE).
"""
from __future__ import annotations

from ..members import DELETE, MEMBER_COLUMNS, TEXT, UNLINK, member_names
from ..text import member_hash
from .shared_sql import SQLTables

ALWAYS_COUNTED = ("reacted", "saved", "interests", "shares", "picks")  # forget-me's answer reads these


class ForgetMember(SQLTables):
    """Mixin: forget_user and reapply_forgotten of the Store protocol."""

    _FOR_UPDATE = ""  # PostgreSQL locks the rows it rewrites (" for update"); SQLite's writer lock does

    def _remember_forgotten(self, db, user: str) -> None:  # pragma: no cover - each backend says
        raise NotImplementedError

    def _merge_forgotten(self) -> None:
        """Bring the backend's copies of the forgotten list together (SQLite: file and table)."""

    def forget_user(self, user: str, *, remember: bool = True) -> dict[str, int]:
        """Take a member out of every column that names them (store.members), in one transaction:
        their own rows deleted, the channel's rows unlinked, their id rewritten out of texts.
        Counts of what changed, by forget-me's headings (reacted: the papers their reactions and
        verdicts were on; saved, interests, shares, picks, and club and feeds when they had any there).

        remember=True also puts the member's hash on the forgotten list, which every start-up
        re-applies, so a restored backup from before the request forgets them again.
        """
        counts = dict.fromkeys(ALWAYS_COUNTED, 0)
        with self.transaction() as db:
            if remember:
                self._remember_forgotten(db, user)
            for col in MEMBER_COLUMNS:
                changed = self._forget_in(db, col, user)
                if col.counted_as and (changed or col.counted_as in ALWAYS_COUNTED):
                    counts[col.counted_as] = counts.get(col.counted_as, 0) + changed
        return counts

    def _forget_in(self, db, col, user: str) -> int:
        if col.forget == DELETE:
            counted = (db.execute(self._q(f"select count(distinct {col.counted_by}) from {col.table} "
                                          f"where {col.name} = ?"), [user]).fetchone()[0]
                       if col.counted_by else None)
            gone = db.execute(self._q(f"delete from {col.table} where {col.name} = ?"), [user]).rowcount
            return gone if counted is None else counted
        if col.forget == UNLINK:
            return db.execute(self._q(f"update {col.table} set {col.name} = null where {col.name} = ?"),
                              [user]).rowcount
        assert col.forget == TEXT, col
        keys = ", ".join(col.key)
        where = " and ".join(f"{k} = ?" for k in col.key)
        changed = 0
        for *key, text in db.execute(self._q(
                f"select {keys}, {col.name} from {col.table} where {col.name} like ?{self._FOR_UPDATE}"),
                [f"%{user}%"]).fetchall():
            rewritten = col.rewrite(text, user)
            if rewritten is not None:
                changed += db.execute(self._q(f"update {col.table} set {col.name} = ? where {where}"),
                                      [rewritten, *key]).rowcount
        return changed

    def member_ids(self) -> set[str]:
        """Every member id the database names, in any column of store.members."""
        names: set[str] = set()
        with self.transaction() as db:
            for col in MEMBER_COLUMNS:
                for (value,) in db.execute(f"select distinct {col.name} from {col.table}").fetchall():
                    names |= member_names(col, value)
        return names

    def reapply_forgotten(self) -> int:
        """Forget again every listed member still named in the database (after a restore); how many."""
        self._merge_forgotten()
        hashes = self.forgotten_hashes()
        if not hashes:
            return 0
        found = sorted(u for u in self.member_ids() if member_hash(u) in hashes)
        for user in found:
            self.forget_user(user, remember=False)
        return len(found)

