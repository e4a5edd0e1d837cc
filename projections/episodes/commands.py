"""Episode and fork commands, and ``decide``: build the deltas of a command.

``decide`` keeps only what it needs to build deltas (command arguments, idempotency, defaults,
the ranking of drift candidates); the rules every delta must obey are ``rules.check``'s, run at
the boundary whatever path brings the delta.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec

from braidlog import Command as _BaseCommand
from braidlog import Confidence, Context, GenericDelta, Ident, Refs, Rejected, UtcTime, ValidationError, plain

from .forks import DEFAULT_POLICY, ForkCandidate, ForkPolicy, continuity_buffer, expired_forks
from .model import (
    EDGE_TYPES,
    MIN_FORK_CONFIDENCE,
    SOFT_LINK_FACTOR,
    AnchorQuoteNoted,
    Episode,
    EpisodeEdgeAdded,
    EpisodeKnotLinked,
    EpisodeLabeled,
    EpisodeOpened,
    EpisodeSummarized,
    ForkClassified,
    ForkExpired,
    ForkPromoted,
    ForkProposed,
    Labels,
    State,
    SummaryText,
    normalize_labels,
)
from .quotes import QUOTE_CATEGORIES, AnchorQuote, QuoteText, quote_key

__all__ = [
    "OpenEpisode", "LabelEpisode", "LinkKnot", "AddEdge", "SummarizeEpisode", "NoteQuote",
    "ForkCandidate", "ProposeForks", "ClassifyFork", "ExpireForks", "Command", "decide",
]


class _Command(_BaseCommand, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class OpenEpisode(_Command, frozen=True):
    """Open an episode (a new id when ``episode_id`` is None; give one to make retries safe)."""

    labels: Labels = Labels()
    summary: SummaryText = ""
    episode_id: Ident | None = None


class LabelEpisode(_Command, frozen=True):
    """Replace an episode's labels."""

    episode_id: Ident
    labels: Labels


class LinkKnot(_Command, frozen=True):
    """Add a tied knot to an episode's ``knot_refs``."""

    episode_id: Ident
    knot_id: Ident


class AddEdge(_Command, frozen=True):
    """Add an edge from one episode to another, or change its confidence."""

    episode_id: Ident
    type: str
    to_episode_id: Ident
    confidence: Confidence = 1.0


class SummarizeEpisode(_Command, frozen=True):
    """Replace an episode's summary cache."""

    episode_id: Ident
    summary: SummaryText


class NoteQuote(_Command, frozen=True):
    """Note a candidate anchor quote (a constraint, decision or open question) for an episode."""

    episode_id: Ident
    text: QuoteText
    category: str
    salience: Confidence = 0.5
    source_delta_id: Ident | None = None


class ProposeForks(_Command, frozen=True):
    """Propose forks off ``parent_episode_id`` from one drift signal (a knot or delta id)."""

    parent_episode_id: Ident
    candidates: list[ForkCandidate]
    signal_id: Ident


class ClassifyFork(_Command, frozen=True):
    """Record a classifier's verdict on a pending fork; enough confirmations promote it."""

    fork_id: Ident
    verdict: str
    classifier: Ident
    confidence: Confidence = 1.0
    signal_id: Ident | None = None


class ExpireForks(_Command, frozen=True):
    """Record the expiry of every pending fork of the braid whose TTL ran out by ``as_of``."""

    as_of: UtcTime | None = None


Command = (OpenEpisode | LabelEpisode | LinkKnot | AddEdge | SummarizeEpisode | NoteQuote
           | ProposeForks | ClassifyFork | ExpireForks)



def _field_error(e: msgspec.ValidationError) -> ValidationError:
    rule, sep, path = str(e).rpartition(" - at `$")
    if not sep:
        return ValidationError("command", str(e))
    return ValidationError(path.rstrip("`").lstrip(".") or "command", rule)


def _checked(command: Any) -> Any:
    """The command re-validated against its own constraints (lengths, ranges, time zones)."""
    try:
        return msgspec.convert(msgspec.to_builtins(command, builtin_types=(datetime,)), type(command))
    except msgspec.ValidationError as e:
        raise _field_error(e) from None


def _episode(state: State, episode_id: str, ctx: Context, field: str = "episode_id") -> Episode:
    ep = state.episodes.get(episode_id)
    if ep is None or ep.braid_id != ctx.braid_id:
        where = f" (it belongs to braid {ep.braid_id!r})" if ep is not None else ""
        raise Rejected(f"{field}: no episode {episode_id!r} in braid {ctx.braid_id!r}{where}; "
                       "open it first with OpenEpisode")
    return ep


def _writable(ep: Episode, field: str = "episode_id") -> Episode:
    if not ep.visible:
        raise Rejected(f"{field}: episode {ep.id!r} is {ep.status}; open a new episode instead")
    return ep


def _open(command: OpenEpisode, state: State, ctx: Context) -> list[GenericDelta]:
    labels = normalize_labels(command.labels)
    if command.episode_id is not None and command.episode_id in state.episodes:
        ep = state.episodes[command.episode_id]
        if (ep.braid_id == ctx.braid_id and ep.fork is None and ep.labels == labels
                and ep.summary_cache == command.summary and not ep.implicit):
            return []
        raise Rejected(f"episode_id: episode {ep.id!r} already exists with other content; "
                       "use LabelEpisode or SummarizeEpisode to change it, or choose a new id")
    payload = EpisodeOpened(command.episode_id or ctx.new_id(), labels, command.summary)
    return [ctx.delta("episode_opened", plain(payload))]


def _label(command: LabelEpisode, state: State, ctx: Context) -> list[GenericDelta]:
    ep = _writable(_episode(state, command.episode_id, ctx))
    if ep.status == "fork_pending":
        raise Rejected(f"episode_id: {ep.id!r} is fork_pending and its labels are what the "
                       "classifier matches; reject it and propose a new fork instead")
    labels = normalize_labels(command.labels)
    if labels == ep.labels:
        return []
    return [ctx.delta("episode_labeled", plain(EpisodeLabeled(ep.id, labels)))]


def _link(command: LinkKnot, state: State, ctx: Context) -> list[GenericDelta]:
    ep = _writable(_episode(state, command.episode_id, ctx))
    knot = state.knots.get(command.knot_id)
    if knot is None or not knot.tied:
        raise Rejected(f"knot_id: no tied knot {command.knot_id!r}; tie the knot before linking it")
    if knot.braid_id != ctx.braid_id:
        raise Rejected(f"knot_id: knot {command.knot_id!r} belongs to braid {knot.braid_id!r}, "
                       f"not {ctx.braid_id!r}")
    if command.knot_id in ep.knot_refs or knot.primary_episode_id == ep.id:
        return []
    payload = EpisodeKnotLinked(ep.id, command.knot_id)
    return [ctx.delta("episode_knot_linked", plain(payload))]


def _edge_delta(ctx: Context, episode_id: str, type: str, to: str, confidence: float) -> GenericDelta:
    payload = EpisodeEdgeAdded(episode_id, type, to, confidence)  # type: ignore[arg-type]  # the edge type: a str, checked against the schema on append
    return ctx.delta("episode_edge_added", plain(payload), confidence=confidence)


def _add_edge(command: AddEdge, state: State, ctx: Context) -> list[GenericDelta]:
    if command.type not in EDGE_TYPES:
        raise ValidationError("type", f"must be one of {', '.join(EDGE_TYPES)}; got {command.type!r}")
    if command.to_episode_id == command.episode_id:
        raise ValidationError("to_episode_id",
                              "must differ from episode_id: an episode has no edge to itself")
    ep = _writable(_episode(state, command.episode_id, ctx))
    _writable(_episode(state, command.to_episode_id, ctx, "to_episode_id"), "to_episode_id")
    for e in ep.edges:
        if e.type == command.type and e.to_episode_id == command.to_episode_id:
            if e.confidence == command.confidence:
                return []
    return [_edge_delta(ctx, ep.id, command.type, command.to_episode_id, command.confidence)]


def _summarize(command: SummarizeEpisode, state: State, ctx: Context) -> list[GenericDelta]:
    ep = _writable(_episode(state, command.episode_id, ctx))
    if ep.summary_cache == command.summary:
        return []
    payload = EpisodeSummarized(ep.id, command.summary)
    return [ctx.delta("episode_summarized", plain(payload))]


def _note(command: NoteQuote, state: State, ctx: Context) -> list[GenericDelta]:
    if command.category not in QUOTE_CATEGORIES:
        raise ValidationError("category", f"must be one of {', '.join(QUOTE_CATEGORIES)}; "
                                          f"got {command.category!r}")
    text = " ".join(command.text.split())
    if not text:
        raise ValidationError("text", "must not be blank")
    ep = _writable(_episode(state, command.episode_id, ctx))
    key = quote_key(text)
    for c in ep.candidates:
        if c.quote.category == command.category and quote_key(c.quote.text) == key:
            return []
    source = command.source_delta_id
    if source is not None and ctx.log is not None:
        record = ctx.log.get(source)
        if record is None:
            raise Rejected(f"source_delta_id: no delta {source!r} in the log; quote a delta that exists")
        if record.delta.braid_id != ctx.braid_id:
            raise Rejected(f"source_delta_id: delta {source!r} belongs to braid "
                           f"{record.delta.braid_id!r}, not {ctx.braid_id!r}")
    quote = AnchorQuote(ctx.new_id(), ep.id, text, command.category,  # type: ignore[arg-type]  # category: checked above
                        command.salience, source)
    refs = Refs(episodes=(ep.id,), deltas=(source,)) if source else Refs(episodes=(ep.id,))
    return [ctx.delta("anchor_quote_noted", plain(AnchorQuoteNoted(quote)), refs=refs)]


def _ranked(command: ProposeForks, parent: Episode, top_k: int) -> list[tuple[Labels, float]]:
    """Candidates normalized, those below MIN_FORK_CONFIDENCE left out, merged by labels (best
    score), ranked by score, cut to the top K."""
    if not command.candidates:
        raise ValidationError("candidates", "must name at least one drift candidate")
    best: dict[Labels, float] = {}
    for i, c in enumerate(command.candidates):
        labels = normalize_labels(c.labels, f"candidates[{i}].labels")
        if not labels.topics and not labels.intents:
            raise ValidationError(f"candidates[{i}].labels",
                                  "must name at least one topic or intent to drift towards")
        if labels == parent.labels:
            raise ValidationError(f"candidates[{i}].labels",
                                  "equal the parent episode's labels: that is not drift")
        if c.score < MIN_FORK_CONFIDENCE:
            continue  # below the fork confidence a proposal opens (and confirms) nothing
        best[labels] = max(best.get(labels, 0.0), c.score)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], msgspec.json.encode(kv[0])))
    return ranked[:top_k]


def _classified(ctx: Context, fork: Episode, verdict: str, classifier: str, signal_id: str,
                confidence: float) -> GenericDelta:
    payload = ForkClassified(fork.id, verdict, classifier, signal_id, confidence)  # type: ignore[arg-type]  # verdict: a str, checked against the schema on append
    return ctx.delta("fork_classified", plain(payload), confidence=confidence)


def _promotion(ctx: Context, state: State, fork: Episode, confirmations: int,
               policy: ForkPolicy, confidence: float) -> list[GenericDelta]:
    buffer = continuity_buffer(state, fork, ctx.now, policy)
    parent_id = fork.fork_record.parent_episode_id
    payload = ForkPromoted(fork.id, parent_id, confirmations, buffer)
    refs = Refs(episodes=(parent_id,), deltas=buffer.message_ids)
    return [
        ctx.delta("fork_promoted", plain(payload), refs=refs, confidence=confidence),
        _edge_delta(ctx, fork.id, "forked_from", parent_id, confidence),
    ]


def _expiries(state: State, ctx: Context, policy: ForkPolicy,
              as_of: datetime) -> tuple[list[GenericDelta], set[str]]:
    out: list[GenericDelta] = []
    gone: set[str] = set()
    for e in expired_forks(state, ctx.braid_id, as_of):
        fork = state.episodes[e.fork_id]
        parent_id, outcome = fork.fork_record.parent_episode_id, fork.fork_record.on_expiry
        payload = ForkExpired(fork.id, parent_id, e.reason, e.expired_at, outcome)  # type: ignore[arg-type]  # reason, outcome: strs checked against the schema on append
        out.append(ctx.delta("fork_expired", plain(payload)))
        if outcome == "soft_link":
            confidence = round(fork.fork_record.confidence * SOFT_LINK_FACTOR, 6)
            out.append(_edge_delta(ctx, fork.id, "soft_link", parent_id, confidence))
        gone.add(fork.id)
    return out, gone


def _propose(command: ProposeForks, state: State, ctx: Context, policy: ForkPolicy) -> list[GenericDelta]:
    parent = _episode(state, command.parent_episode_id, ctx, "parent_episode_id")
    ranked = _ranked(command, parent, policy.top_k)
    out, expired = _expiries(state, ctx, policy, ctx.now)
    signal = command.signal_id
    children = [e for e in state.episodes.values()
                if e.fork is not None and e.fork.parent_episode_id == parent.id]
    pending = [e for e in children if e.status == "fork_pending" and e.id not in expired]
    confirmations = {f.id: f.fork_record.confirmations for f in pending}
    confidence = {f.id: f.fork_record.confidence for f in pending}
    judged: set[str] = set()    # forks with a verdict from this signal: one each
    resolved: set[str] = set()  # forks promoted or rejected by this signal
    new: list[tuple[int, Labels, float]] = []
    for rank, (labels, score) in enumerate(ranked, start=1):
        if any(c.labels == labels and (signal in c.fork_record.signals or c.fork_record.outcome == "promoted")
               for c in children):
            continue  # this signal was already applied, or this drift already forked
        candidate = ForkCandidate(labels=labels, score=score)
        recognized = False
        for fork in pending:
            verdict = policy.classifier(fork, candidate, state)
            if verdict is None:
                continue
            recognized = True
            if signal in fork.fork_record.signals or fork.id in judged:
                continue
            judged.add(fork.id)
            out.append(_classified(ctx, fork, verdict.verdict, policy.classifier_name, signal,
                                   verdict.confidence))
            if verdict.verdict == "reject":
                resolved.add(fork.id)
                continue
            confirmations[fork.id] += 1
            confidence[fork.id] = max(confidence[fork.id], verdict.confidence)
            if confirmations[fork.id] >= policy.confirmations:
                out.extend(_promotion(ctx, state, fork, confirmations[fork.id], policy,
                                      confidence[fork.id]))
                resolved.add(fork.id)
        if not recognized:
            new.append((rank, labels, score))
    room = policy.top_k - sum(1 for f in pending if f.id not in resolved)
    expires_at = ctx.now + timedelta(minutes=policy.ttl_minutes)
    on_expiry: Literal["soft_link", "discarded"] = "soft_link" if policy.on_expiry == "soft_link" else "discarded"
    for rank, labels, score in new[:max(room, 0)]:
        payload = ForkProposed(ctx.new_id(), parent.id, labels, score, rank, signal,
                               policy.ttl_knots, expires_at, on_expiry)
        out.append(ctx.delta("fork_proposed", plain(payload), confidence=score))
    return out


def _classify(command: ClassifyFork, state: State, ctx: Context, policy: ForkPolicy) -> list[GenericDelta]:
    if command.verdict not in ("confirm", "reject"):
        raise ValidationError("verdict", f"must be 'confirm' or 'reject'; got {command.verdict!r}")
    ep = _episode(state, command.fork_id, ctx, "fork_id")
    if ep.fork is None:
        raise Rejected(f"fork_id: episode {ep.id!r} was opened, not proposed as a fork; "
                       "only proposed forks are classified")
    signal = command.signal_id or command.classifier
    fork = ep.fork
    if any(v.classifier == command.classifier and v.signal_id == signal for v in fork.verdicts):
        return []
    if ep.status == "active" and command.verdict == "confirm":
        return []  # promoted already: a further confirmation has nothing left to do
    out = [_classified(ctx, ep, command.verdict, command.classifier, signal, command.confidence)]
    if command.verdict == "confirm" and ep.status == "fork_pending":  # else: the boundary refuses
        n = fork.confirmations + 1
        if n >= policy.confirmations:
            out.extend(_promotion(ctx, state, ep, n, policy, max(fork.confidence, command.confidence)))
    return out


def _expire(command: ExpireForks, state: State, ctx: Context, policy: ForkPolicy) -> list[GenericDelta]:
    as_of = command.as_of or ctx.now
    if as_of > ctx.now:
        raise ValidationError("as_of", f"must not be later than now ({ctx.now.isoformat()}): "
                                       "a fork cannot be expired ahead of time")
    return _expiries(state, ctx, policy, as_of)[0]


def decide(command: Any, state: State, ctx: Context, policy: ForkPolicy | None = None) -> list[GenericDelta]:
    """The deltas a command yields against ``state``: [] when already done; refusals raise."""
    policy = policy or DEFAULT_POLICY
    command = _checked(command)
    match command:
        case OpenEpisode():
            return _open(command, state, ctx)
        case LabelEpisode():
            return _label(command, state, ctx)
        case LinkKnot():
            return _link(command, state, ctx)
        case AddEdge():
            return _add_edge(command, state, ctx)
        case SummarizeEpisode():
            return _summarize(command, state, ctx)
        case NoteQuote():
            return _note(command, state, ctx)
        case ProposeForks():
            return _propose(command, state, ctx, policy)
        case ClassifyFork():
            return _classify(command, state, ctx, policy)
        case ExpireForks():
            return _expire(command, state, ctx, policy)
    raise ValidationError("command", f"episodes does not know {type(command).__name__}; "
                                     f"use one of {', '.join(c.__name__ for c in Command.__args__)}")
