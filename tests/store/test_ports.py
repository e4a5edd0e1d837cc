"""The ports each store asserts: MemoryLog and LmdbLog name the roles and capabilities they
implement as their bases, each member implemented (no Protocol stub answers), and the roles stay
small. The behaviour behind each port is its own suite beside this one (test_reader.py,
test_writer.py, test_bodies.py, test_indexes.py, test_checkpoints.py, test_side_tables.py,
test_tree.py, test_erasure.py)."""

from __future__ import annotations

from braidlog import IntegrityError


def test_each_store_asserts_the_ports_it_implements(tmp_path):
    """MemoryLog and LmdbLog name FullStore (every role and capability but OnDisk) as a base,
    LmdbLog OnDisk too; each implements every member of its ports itself (no Protocol stub
    answers for a method), and code asks ``isinstance(store, Capability)`` for an optional one."""
    from braidlog import LmdbLog, MemoryLog
    from braidlog.store import CAPABILITIES, FullStore, LogReader, LogStore, OnDisk

    ports = {MemoryLog: (LogReader, LogStore, *CAPABILITIES[:-1]),
             LmdbLog: (LogReader, LogStore, *CAPABILITIES)}
    for cls, implemented in ports.items():
        for port in implemented:
            assert port in cls.__mro__, (cls, port)
            methods = [n for n, v in vars(port).items() if callable(v) and not n.startswith("_")]
            assert methods, port
            for name in methods:
                assert getattr(cls, name) is not vars(port)[name], f"{cls.__name__}.{name} is a stub"
    memory, disk = MemoryLog(), LmdbLog(tmp_path / "s")
    try:
        assert isinstance(memory, FullStore) and not isinstance(memory, OnDisk)
        assert isinstance(disk, FullStore) and isinstance(disk, OnDisk)
        assert memory.readonly is False and disk.readonly is False
        assert memory.spaces() == {} == disk.spaces()
    finally:
        disk.close()


def test_the_roles_are_small_and_the_reader_is_what_views_are():
    """LogReader is the reads alone, LogStore adds the writes; a view of the log (ReadView, the
    boundary's BatchView) is a LogReader and not a LogStore."""
    from braidlog import Braid, MemoryLog
    from braidlog.store import LogReader, LogStore, store_of

    def members(port):
        return {n for n, v in vars(port).items() if callable(v) and not n.startswith("_")}

    assert members(LogReader) == {"head", "read", "get", "seq_of", "scan", "scan_braid", "scan_kind",
                                  "scan_refs", "braid_head"}
    assert members(LogStore) == {"append", "append_batch", "commit", "commit_locked", "close"}
    store = MemoryLog()
    braid = Braid(store)
    view = braid.at(0)
    assert store_of(braid) is store and store_of(store) is store and store_of(view) is view.log
    assert isinstance(view.log, LogReader) and not isinstance(view.log, LogStore)


def test_integrity_error_type_is_exported():
    assert issubclass(IntegrityError, Exception)
