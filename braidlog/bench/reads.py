"""The read workloads: scan and verify, replay, time travel, and the proofs' costs (the tree on
append, inclusion and consistency proofs, checkpoints); each timed on braidlog and its peers."""

from __future__ import annotations

import random
import time

from ..audit import entity_at
from ..braid import Braid
from ..delta import encode
from ..errors import BraidlogError
from ..lmdb.log import LmdbLog
from .data import BATCH, COUNTER, ENTITIES, all_projections, build_log
from .harness import Run, Sample, each, percentile, quiet_heap, remove, timed
from .peers import ES_PEERS, NO_TREE, EventsourcingApp, NoTreeLog, RawLmdb, SqliteLog, eventsourcing_installed, sql_row

__all__ = ["RUNNERS", "STEPS"]

# -- scan with decode, verify ------------------------------------------------------------------------

def _built_log(run: Run) -> str:
    """A store of ``size`` deltas, built once per run (for scan and replay)."""
    if "log" not in run.cache:
        n = run.config.size
        label = f"building a log of {n:,} deltas"
        run.step(label)
        path = run.path("scan-log")
        build_log(path, run.session, n, progress=run.counting(label, n)).close()
        run.cache["log"] = path
    return run.cache["log"]


def _copies(run: Run) -> tuple[str, str]:
    """A raw LMDB database and a sqlite3 table of the same records, built once per run."""
    if "copies" not in run.cache:
        n = run.config.size
        label = f"copying {n:,} records to raw LMDB and sqlite3"
        run.step(label)
        progress = run.counting(label, n)
        raw_path = run.path("scan-raw")
        raw = RawLmdb(raw_path, durable=False)
        sql_path = run.path("scan.db")
        sql = SqliteLog(sql_path, durable=False)
        for at in range(0, n, BATCH):
            chunk = run.session.deltas(min(BATCH, n - at), at)
            raw.put_batch([encode(d) for d in chunk])
            sql.put_batch([sql_row(d) for d in chunk])
            progress(at + len(chunk))
        raw.close()
        sql.close()
        run.cache["copies"] = (raw_path, sql_path)
    return run.cache["copies"]


def _scan(run: Run) -> list[Sample]:
    path = _built_log(run)
    raw_path, sql_path = _copies(run)
    n = run.config.size
    out: list[Sample] = []
    W = "scan"
    log = LmdbLog(path, create=False)
    raw = RawLmdb(raw_path, durable=False)
    sql = SqliteLog(sql_path, durable=False)
    try:
        run.step("scan · braidlog scan + decode")
        seconds, count = timed(lambda: sum(1 for _ in log.scan()))
        assert count == n
        out.append(Sample(W, "braidlog", "scan+decode/s", n / seconds, "/s", "higher"))
        run.step("scan · raw LMDB cursor + msgspec decode")
        seconds, count = timed(raw.scan_decode)
        out.append(Sample(W, "raw LMDB", "scan+decode/s", count / seconds, "/s", "higher"))
        run.step("scan · sqlite3 select + msgspec decode")
        seconds, count = timed(sql.scan_decode)
        out.append(Sample(W, "sqlite3", "scan+decode/s", count / seconds, "/s", "higher"))
        run.step("scan · braidlog scan_braid + decode (through the braid index)")
        braids = list(log.braids())
        seconds, count = timed(lambda: sum(1 for b in braids for _ in log.scan_braid(b)))
        assert count == n
        out.append(Sample(W, "braidlog", "index scan/s", n / seconds, "/s", "higher"))
        run.step("scan · braidlog get by id (through the id index)")
        ids = [r.delta.id for r in log.scan(limit=min(n, 20_000))]
        seconds, _ = timed(lambda: [log.get(i) for i in ids])
        out.append(Sample(W, "braidlog", "get by id/s", len(ids) / seconds, "/s", "higher"))
        run.step("scan · braidlog verify")
        seconds, _ = timed(log.verify)
        out.append(Sample(W, "braidlog", "verify/s", n / seconds, "/s", "higher"))
        run.step("scan · raw LMDB cursor + blake3")
        seconds, count = timed(raw.scan_blake3)
        out.append(Sample(W, "raw LMDB", "verify/s", count / seconds, "/s", "higher"))
    finally:
        log.close()
        raw.close()
        sql.close()
    return out


# -- replay: every projection, the trivial fold, and eventsourcing's aggregate read ---------------------

def _replay(run: Run) -> list[Sample]:
    path = _built_log(run)
    n = run.config.size
    out: list[Sample] = []
    W = "replay"
    projections, broken = all_projections()
    if "replay:broken" not in run.cache:
        run.cache["replay:broken"] = True
        run.skipped.extend(f"replay: left out {b}" for b in broken)
    never = 1 << 62  # measure the fold alone: no checkpoint writes on the way
    log = LmdbLog(path, create=False)
    try:
        label = f"braidlog, {len(projections)} projections"
        run.step(f"replay · {label}")
        braid = Braid(log, projections, checkpoint_every=never)
        seconds, _ = timed(braid.rebuild)
        out.append(Sample(W, "braidlog", "deltas/s", n / seconds, "/s", "higher"))
        run.cache["replay:projections"] = [p.name for p in projections]
        run.step("replay · braidlog catch-up, trivial fold")
        braid = Braid(log, [COUNTER], checkpoint_every=never)
        seconds, _ = timed(braid.rebuild)
        if braid.state(COUNTER.name) != n:
            raise BraidlogError("the trivial fold did not see every delta")
        out.append(Sample(W, "braidlog · trivial fold", "deltas/s", n / seconds, "/s", "higher"))
    finally:
        log.close()
    if eventsourcing_installed():
        for persistence, label in ES_PEERS:
            key = f"es:{persistence}"
            if key not in run.cache:
                run.step(f"replay · building {label}")
                progress = run.counting(f"replay · building {label}", n)
                es = EventsourcingApp(persistence, run.path("es-replay.db"))
                for at in range(0, n, BATCH):
                    es.save(run.session.deltas(min(BATCH, n - at), at))
                    progress(min(at + BATCH, n))
                run.cache[key] = es
            es = run.cache[key]
            run.step(f"replay · {label} aggregate read")
            seconds, count = timed(es.read_all)
            if count != n:
                raise BraidlogError(f"{label} read {count} events of {n}")
            out.append(Sample(W, f"{label} aggregate read", "deltas/s", n / seconds, "/s", "higher"))
    return out


# -- time travel ------------------------------------------------------------------------------------
def _time_travel(run: Run) -> list[Sample]:
    cfg = run.config
    n = cfg.size
    if "tt" not in run.cache:
        path = _built_log(run)
        run.step(f"time travel · checkpointing {ENTITIES.name} every {cfg.checkpoint_every:,}")
        braid = Braid(LmdbLog(path, durable=False), [ENTITIES], checkpoint_every=cfg.checkpoint_every)
        braid.checkpoint()
        run.cache["tt"] = braid
        run.cache["tt:rep"] = 0
    braid = run.cache["tt"]
    run.cache["tt:rep"] += 1
    rnd = random.Random(cfg.seed * 7919 + run.cache["tt:rep"])
    points = [rnd.randint(1, n) for _ in range(cfg.queries)]
    run.step("time travel · braidlog at(seq)")
    lat = each(lambda seq: braid.at(seq).state(ENTITIES.name), points)
    W = "time travel"
    out = [
        Sample(W, "braidlog", "at(seq) p50 ms", percentile(lat, 50) * 1000, "ms", "lower"),
        Sample(W, "braidlog", "at(seq) p99 ms", percentile(lat, 99) * 1000, "ms", "lower"),
        Sample(W, "braidlog", "at(seq)/s", len(lat) / sum(lat), "/s", "higher"),
    ]
    fields = next((p for p in all_projections()[0] if p.name == "fields" and p.local), None)
    if fields is None:  # the fields projection is missing or no longer local: nothing to time
        return out
    if "tt:entity" not in run.cache:  # lazy: entity as-of needs no live state
        run.cache["tt:entity"] = Braid(braid.log, [fields], lazy=True)
    by_entity: Braid = run.cache["tt:entity"]
    pairs = [(seq, f"topic-{rnd.randrange(run.session.entities):05d}") for seq in points]
    run.step("time travel · braidlog entity as-of")
    lat = each(lambda p: entity_at(by_entity.at(p[0]), "fields", p[1]), pairs)
    out += [Sample(W, "braidlog", "entity as-of p50 ms", percentile(lat, 50) * 1000, "ms", "lower"),
            Sample(W, "braidlog", "entity as-of p99 ms", percentile(lat, 99) * 1000, "ms", "lower")]
    return out


def _proofs(run: Run) -> list[Sample]:
    from ..proofs import consistency_proof, inclusion_proof, issue, read_key
    from ..proofs.keys import generate, write_key

    cfg, W = run.config, "proofs"
    n = cfg.size
    batches = [run.deltas(n)[i:i + BATCH] for i in range(0, n, BATCH)]
    run.step("proofs · batched append with and without the tree, batches interleaved")
    with_path, without_path = run.path("tree"), run.path("no-tree")
    with_tree, without = LmdbLog(with_path, durable=True), NoTreeLog(without_path, durable=True)
    spent = {True: 0.0, False: 0.0}
    try:
        with quiet_heap():
            for i, b in enumerate(batches):  # alternate which goes first: load swings hit both
                for tree in ((True, False) if i % 2 else (False, True)):
                    store = with_tree if tree else without
                    t = time.perf_counter()
                    store.append_batch(b)
                    spent[tree] += time.perf_counter() - t
    finally:
        without.close()
        remove(without_path)
    out = [Sample(W, "braidlog", "append deltas/s", n / spent[True], "/s", "higher"),
           Sample(W, NO_TREE, "append deltas/s", n / spent[False], "/s", "higher")]
    try:
        rnd = random.Random(cfg.seed * 31 + n)
        seqs = [rnd.randint(1, n) for _ in range(cfg.queries * 5)]
        run.step("proofs · inclusion proofs of random records in the head's tree")
        lat = each(lambda seq: inclusion_proof(with_tree, seq, n), seqs)
        out += [Sample(W, "braidlog", "inclusion proof p50 ms", percentile(lat, 50) * 1000, "ms", "lower"),
                Sample(W, "braidlog", "inclusion proof p99 ms", percentile(lat, 99) * 1000, "ms", "lower")]
        run.step("proofs · consistency proofs from random sizes to the head")
        lat = each(lambda old: consistency_proof(with_tree, old, n), seqs)
        out += [Sample(W, "braidlog", "consistency proof p50 ms", percentile(lat, 50) * 1000, "ms", "lower"),
                Sample(W, "braidlog", "consistency proof p99 ms", percentile(lat, 99) * 1000, "ms", "lower")]
        try:
            key = generate("bench.example/log")
        except BraidlogError:
            run.skipped.append("proofs · checkpoint: pip install '.[proofs]'")
            return out
        key_path = run.path("log.key")
        write_key(key, key_path)
        run.step("proofs · `braidlog checkpoint`'s calls, in process (key, open, sign, keep)")

        def checkpoint(_: int) -> None:  # what the command does: read the key, open, sign, keep
            signer = read_key(key_path)
            with LmdbLog(with_path, create=False, readonly=False) as store:
                issue(store, signer)
        lat = each(checkpoint, range(max(10, cfg.queries // 4)))
        out += [Sample(W, "braidlog", "checkpoint p50 ms", percentile(lat, 50) * 1000, "ms", "lower")]
    finally:
        with_tree.close()
        remove(with_path)
    return out


RUNNERS = {"scan": _scan, "replay": _replay, "time_travel": _time_travel, "proofs": _proofs}
STEPS = {"scan": 5, "replay": 5, "time_travel": 2, "proofs": 4}
