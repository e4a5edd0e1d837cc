"""Commands: a missing, unknown or doubly given field is a ValidationError naming it, for every
command of every projection (``braidlog.Command``), never msgspec's bare TypeError."""

from __future__ import annotations

import importlib
import inspect

import msgspec
import pytest

from braidlog import Command, ValidationError

FAMILIES = ("beads", "decisions", "episodes", "fields", "knots", "memories", "trust")

#: The commands each family's decide takes today; each must be a Command.
COMMANDS = {
    "beads": ["WriteBead", "RefBead"],
    "decisions": ["RecordDecision", "SupersedeDecision", "DraftProposal", "AcceptProposal",
                  "RejectProposal", "FalsifyProposal", "UseDecision", "SetTrustBoundary",
                  "RegisterTargetAlias"],
    "episodes": ["OpenEpisode", "LabelEpisode", "LinkKnot", "AddEdge", "SummarizeEpisode",
                 "NoteQuote", "ProposeForks", "ClassifyFork", "ExpireForks"],
    "fields": ["ReviseField", "BumpSalience", "ArchiveTopic", "ArchiveTopics", "RestoreTopic"],
    "knots": ["OpenKnot", "BeginSpeak", "Speak", "CallTool", "TieKnot"],
    "memories": ["AddMemory", "UpdateMemory", "BindProfile"],
    "trust": ["ProposeHypothesis", "RecordTest", "PromoteHypothesis", "RejectHypothesis",
              "AssessTrust"],
}


def command_classes() -> list[type]:
    """Every Command with fields defined in a projection family (a module or a package)."""
    found = set()
    for family in FAMILIES:
        module = importlib.import_module(f"braidlog.projections.{family}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, Command) and cls.__module__.startswith(module.__name__)
                    and cls.__struct_fields__):
                found.add(cls)
    return sorted(found, key=lambda c: (c.__module__, c.__name__))


CLASSES = command_classes()


@pytest.mark.parametrize("family, name", [(f, n) for f, ns in COMMANDS.items() for n in ns])
def test_every_command_of_every_projection_is_a_command(family, name):
    cls = getattr(importlib.import_module(f"braidlog.projections.{family}"), name, None)
    if cls is None:
        pytest.skip(f"{family} has no {name} any more")
    assert issubclass(cls, Command), f"{family}.{name} derives from msgspec.Struct, not braidlog.Command"


def ids(cls: type) -> str:
    return f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"


def required(cls: type) -> list[str]:
    return [f.name for f in msgspec.structs.fields(cls) if f.required]


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_an_unknown_field_is_named_with_the_fields_the_command_takes(cls):
    with pytest.raises(ValidationError) as e:
        cls(**{f: None for f in required(cls)}, no_such_field=3)
    assert e.value.field == "no_such_field"
    assert e.value.rule.startswith(f"is not a field of {cls.__name__} (")
    assert f"{cls.__name__} takes " in e.value.rule
    for field in cls.__struct_fields__:
        assert field in e.value.rule


@pytest.mark.parametrize("cls", [c for c in CLASSES if required(c)], ids=ids)
def test_each_missing_required_field_is_named(cls):
    names = required(cls)
    for missing in names:
        given = {f: None for f in names if f != missing}
        with pytest.raises(ValidationError) as e:
            cls(**given)
        assert (e.value.field, e.value.rule.split(" (")[0]) == (missing, "is required")


def test_the_messages_read_as_the_rule_and_the_remedy():
    from braidlog.projections.decisions import RecordDecision

    with pytest.raises(ValidationError, match=r"^priority: is not a field of RecordDecision"):
        RecordDecision(title="Use Postgres", target="storage.db", rationale="x" * 20, priority=3)

    with pytest.raises(ValidationError) as e:
        RecordDecision(title="Use Postgres", target="storage.db")
    assert e.value.field == "rationale"
    assert str(e.value).startswith("rationale: is required (RecordDecision takes title, target, rationale")
    with pytest.raises(ValidationError, match=r"^rationle: is not a field of RecordDecision "
                                              r"\(did you mean 'rationale'\? RecordDecision takes "):
        RecordDecision(title="Use Postgres", target="storage.db", rationle="x" * 20)


class Tie(Command, frozen=True):
    knot_id: str
    summary: str = ""


def test_positional_and_doubly_given_arguments():
    assert Tie("k") == Tie(knot_id="k")
    with pytest.raises(ValidationError, match=r"^Tie: takes its fields by name \(Tie takes knot_id "
                                              r"and optionally summary\)$"):
        Tie("k", "s", "what")
    with pytest.raises(ValidationError, match=r"^knot_id: is given twice to Tie, by position and by name$"):
        Tie("k", knot_id="k")


def test_a_string_that_is_not_text_is_refused_naming_the_field():
    with pytest.raises(ValidationError) as e:
        Tie(knot_id="k", summary="ab\ud800")
    assert e.value.field == "summary"
    assert e.value.rule.startswith("must be text UTF-8 can encode: '\\ud800' at index 2")


def test_other_type_errors_are_not_rewritten():
    class Checked(Command, frozen=True):
        n: int

        def __post_init__(self):
            raise TypeError("a bug in __post_init__ stays a bug")

    with pytest.raises(TypeError, match="stays a bug"):
        Checked(n=1)


def test_decoding_a_command_refuses_unknown_fields():
    with pytest.raises(msgspec.ValidationError, match="unknown field `zz`"):
        msgspec.convert({"knot_id": "k", "zz": 1}, Tie)
