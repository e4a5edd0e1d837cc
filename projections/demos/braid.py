"""Demo: bead versions, a two-pass knot, and a dream hypothesis that decays (Braid seed)."""

from __future__ import annotations

from datetime import datetime, timedelta

import braidlog
from braidlog import BeadRef, Provenance, Rejected
from braidlog.projections import beads, knots, trust

BRAID = "braid-demo"


def write(braid: braidlog.Braid, start: datetime, braid_id: str | None = None) -> list[str]:
    """Append a scripted piece of a session starting at ``start`` (into ``braid_id``, else a braid
    of its own); lines saying what it shows."""
    stamp = start.strftime("%Y%m%dT%H%M%S%f")
    tool_bead, thought_bead, knot_id = f"bead-web_search-{stamp}", f"bead-thought-{stamp}", f"knot-{stamp}"
    braid_id = braid_id or f"{BRAID}-{stamp}"  # a braid per run: an interrupted run blocks no other
    lines: list[str] = []

    def run(name: str, command: object, at: timedelta, provenance: Provenance | str = "system"
            ) -> list[braidlog.Record]:
        return braid.execute(name, command, braid_id=braid_id, provenance=provenance, now=start + at)

    # Beads: a tool bead, then an update that makes a second version active.
    created = run("beads", beads.WriteBead(bead_id=tool_bead, bead_type="tool_bead", name="web_search",
                                           content={"params": ["q"]}), timedelta(0))
    run("beads", beads.WriteBead(bead_id=tool_bead, content={"params": ["q", "region"]},
                                 expected_version=1), timedelta(minutes=1))
    state = braid.state("beads")
    v1, v2 = beads.versions(state, tool_bead)
    lines.append(f"beads: tool_bead web_search written as v1, updated to v2; v1 stays addressable "
                 f"as {v1.body.bead_version_id} (params {v1.body.content['params']})")

    # A knot: think (tool call + result + reasoning bead), speak, tie.
    t = timedelta(minutes=2)
    braid.append(braidlog.delta(braid_id, "message", {"text": "What's the weather in Lisbon tomorrow?"},
                                ts=start + t))
    me = Provenance("assistant", knot_id=knot_id)
    run("knots", knots.OpenKnot(knot_id=knot_id, planned_tools=(knots.PlannedTool(tool="web_search"),)),
        t + timedelta(seconds=1), "assistant")
    run("knots", knots.CallTool(knot_id=knot_id, tool="web_search", args={"q": "Lisbon weather tomorrow"},
                                call_id="call-1"), t + timedelta(seconds=2), "assistant")
    braid.append(braidlog.delta(braid_id, "tool_result", {"tool": "web_search", "call_id": "call-1",
                                                       "output": "sunny, 19 C"},
                                provenance=Provenance("tool", knot_id=knot_id), ts=start + t + timedelta(seconds=3)))
    used = run("beads", beads.RefBead(bead_id=tool_bead, role="used"), t + timedelta(seconds=4), me)
    run("beads", beads.WriteBead(
        bead_id=thought_bead, bead_type="reasoning_bead", name="thought summary",
        reasoning=beads.Reasoning(narrative="I looked up tomorrow's Lisbon forecast and found sun.",
                                  fields=beads.ReasoningFields(goal="answer the weather question",
                                                               decisions=("use web_search",)))),
        t + timedelta(seconds=5), me)
    run("knots", knots.Speak(knot_id=knot_id, text="Tomorrow in Lisbon: sunny, about 19 C."),
        t + timedelta(seconds=6), "assistant")
    try:
        run("knots", knots.CallTool(knot_id=knot_id, tool="web_search", args={"q": "UV index"}),
            t + timedelta(seconds=7), "assistant")
    except Rejected as e:
        rule = e.reason.split(": ")[1]  # "delta 0: <rule>: <detail>"
        lines.append(f"two-pass rule: a tool call in the speak pass was refused, nothing appended ({rule})")
    run("knots", knots.TieKnot(knot_id=knot_id, summary="Answered the Lisbon weather question.",
                               thought_summary_bead_ref=BeadRef(thought_bead, "used")),
        t + timedelta(seconds=8), "assistant")
    k = knots.knot(braid.state("knots"), knot_id)
    assert k is not None and k.tied is not None
    rng = k.tied.delta_range
    first, last = braid.log.seq_of(rng.start_delta_id), braid.log.seq_of(rng.end_delta_id)
    lines.append(f"knot {knot_id}: think (1 tool call, {len(k.tied.executed_tools)} tool result) -> "
                 f"speak -> tied over seqs {first}..{last} in episode {k.tied.primary_episode_id}")
    run("beads", beads.WriteBead(bead_id=tool_bead, content={"params": ["q", "region", "units"]}),
        t + timedelta(minutes=5))
    state = braid.state("beads")
    then = beads.resolve(state, BeadRef(tool_bead, "used"), seq=used[0].seq)
    now = beads.resolve(state, BeadRef(tool_bead, "used"))
    v1_seq = created[-1].seq
    past = beads.resolve(braid.at(v1_seq).state("beads"), BeadRef(tool_bead, "used"))
    def v(record: beads.VersionRecord | None) -> str:
        return f"v{record.body.version}" if record is not None else "none"

    lines.append(f"the knot's BeadRef to web_search without a version (seq {used[0].seq}) resolves to "
                 f"{v(then)}, the version active then; the bead is now at {v(now)}, and "
                 f"braid.at({v1_seq}) sees {v(past)}")

    # Dream: a hypothesis, low-confidence by default, that decays while nothing reinforces it.
    t = timedelta(minutes=8)  # inside this piece's slot, so time travel by datetime meets it in order
    proposed = run("trust", trust.ProposeHypothesis(
        statement="The user checks the weather every morning before 8."), t, "dream")
    hid = proposed[0].delta.id
    ts = braid.state("trust")
    values = [trust.confidence_at(ts, hid, start + t + timedelta(days=d)) or 0.0 for d in (0, 1, 2)]
    lines.append(f"dream hypothesis {hid}: confidence {values[0]:.2f} at once, {values[1]:.3f} after "
                 f"1 day, {values[2]:.3f} after 2 days (half-life 1 day, never reinforced)")
    try:
        run("trust", trust.PromoteHypothesis(hypothesis_id=hid), t + timedelta(minutes=1))
    except Rejected as e:
        lines.append(f"promotion refused until its tests pass: {e.reason}")
    return lines
