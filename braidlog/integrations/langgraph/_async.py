"""The saver's async methods. ``aput`` and ``aput_writes`` queue their call for the saver's batch
thread (``_batch``), which commits the calls queued at once in one durable commit; the others
run their sync twin in a worker thread of the saver's own pool, so that calls made at once are
in flight together (and the writes among them share the store's commits: its writer queue groups
threads, not coroutines)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from ._batch import Batches

__all__ = ["InWorkerThreads", "WORKERS"]

WORKERS = 64  # threads the async methods run the sync ones in: calls in flight share commits


class InWorkerThreads(BaseCheckpointSaver[str]):
    """The async half of a checkpointer whose sync methods may block on a durable commit."""

    _pool: ThreadPoolExecutor | None
    _lock: threading.RLock
    _batches: Batches

    async def _off(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="braidlog-saver")
        return await asyncio.get_running_loop().run_in_executor(self._pool, lambda: fn(*args))

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        return await self._off(self.get_tuple, config)

    async def alist(self, config: Any, *, filter: Any = None, before: Any = None,
                    limit: Any = None) -> AsyncIterator[CheckpointTuple]:
        items = await self._off(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aget_delta_channel_history(self, *, config: Any, channels: Any) -> dict[str, Any]:
        return await self._off(lambda: self.get_delta_channel_history(config=config, channels=channels))

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        return await self._batches.call(True, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: Any, task_path: Any = "") -> None:
        await self._batches.call(False, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: Any) -> None:
        await self._off(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Any) -> None:
        await self._off(self.delete_for_runs, run_ids)

    async def aprune(self, thread_ids: Any, *, strategy: Any = "keep_latest") -> None:
        await self._off(lambda: self.prune(thread_ids, strategy=strategy))

    async def acopy_thread(self, source_thread_id: Any, target_thread_id: Any) -> None:
        await self._off(self.copy_thread, source_thread_id, target_thread_id)
