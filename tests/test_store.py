"""The LogStore contract, run against MemoryLog and LmdbLog (the ``log`` fixture)."""

from .store_contract import *  # noqa: F401,F403


def test_each_store_asserts_the_ports_it_implements(tmp_path):
    """MemoryLog names LogStore as its base, LmdbLog LogStore and OnDisk; each implements every
    member of its ports itself (no Protocol stub answers for a method), and code asks
    ``isinstance(store, OnDisk)`` for the optional capability."""
    from braidlog import LmdbLog, LogStore, MemoryLog
    from braidlog.store import OnDisk

    ports = {MemoryLog: (LogStore,), LmdbLog: (LogStore, OnDisk)}
    for cls, implemented in ports.items():
        for port in implemented:
            assert port in cls.__mro__, (cls, port)
            methods = [n for n, v in vars(port).items() if callable(v) and not n.startswith("_")]
            assert len(methods) >= 4, port
            for name in methods:
                assert getattr(cls, name) is not vars(port)[name], f"{cls.__name__}.{name} is a stub"
    memory, disk = MemoryLog(), LmdbLog(tmp_path / "s")
    try:
        assert isinstance(memory, LogStore) and not isinstance(memory, OnDisk)
        assert isinstance(disk, LogStore) and isinstance(disk, OnDisk)
        assert memory.readonly is False and disk.readonly is False
        assert memory.spaces() == {} == disk.spaces()
    finally:
        disk.close()
