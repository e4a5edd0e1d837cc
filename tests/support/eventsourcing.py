"""A small eventsourcing application (eventsourcing's own DogSchool) and the environment that puts
it on braidlog."""

from __future__ import annotations

from uuid import UUID

import pytest

pytest.importorskip("eventsourcing", reason="needs eventsourcing: pip install 'braidlog[eventsourcing]'")

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

MODULE = "braidlog.integrations.eventsourcing"


class Dog(Aggregate):
    @event("Registered")
    def __init__(self, name: str) -> None:
        self.name = name
        self.tricks: list[str] = []

    @event("TrickAdded")
    def add_trick(self, trick: str) -> None:
        self.tricks.append(trick)


class DogSchool(Application[UUID]):
    def register(self, name: str) -> UUID:
        dog = Dog(name)
        self.save(dog)
        return dog.id

    def teach(self, dog_id: UUID, trick: str) -> None:
        dog = self.repository.get(dog_id)
        dog.add_trick(trick)
        self.save(dog)


def env(path, **more) -> dict[str, str]:
    return {"PERSISTENCE_MODULE": MODULE, "BRAIDLOG_STORE": str(path), **more}


