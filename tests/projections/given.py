"""Given deltas / when a command / then deltas: the pure harness of the projection tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import braidlog
from braidlog import Context

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Given:
    """The deltas so far, a decider, and a clock that moves one hour per command."""

    def __init__(self, decider: braidlog.Decider, *, start: datetime = T0,
                 braid_id: str = "agent-1") -> None:
        self.decider = decider
        self.start = start
        self.braid_id = braid_id
        self.deltas: list[braidlog.GenericDelta] = []
        self.hour = 0

    @property
    def state(self):
        return self.decider.fold(self.deltas)

    def when(self, command, *, at: datetime | None = None) -> list[braidlog.GenericDelta]:
        """Decide ``command`` on the state so far; keep and return the deltas it makes."""
        now = at or self.start + timedelta(hours=self.hour)
        self.hour += 1
        out = self.decider.decide(command, self.state, Context(now=now, braid_id=self.braid_id))
        for d in out:
            braidlog.validate(d)  # every delta decide makes passes the registry's schema
        self.deltas.extend(out)
        return out
