"""Run one job's shards in forked processes and bring their results back, in shard order.

`run_shards(count, work)` calls `work(0)` in this process and `work(1)` … `work(count - 1)`
each in a child forked first, so the shards run on as many cores at once. A child inherits
everything already loaded (no pickling of inputs, no re-import); it sends its result back
pickled over a pipe and leaves with `os._exit`, never running this process's exit handlers
or flushing its buffers twice. An exception in a shard is raised here: this process's own
first, else a child's (its traceback in the message when it cannot be pickled).

Fork only: the children share nothing afterwards, so a shard must not depend on another's
state (the caller partitions by a key whose state is independent). Call it from synchronous
code: a child never returns into an event loop of the parent.
"""

from __future__ import annotations

import contextlib
import copyreg
import dataclasses
import operator
import os
import pickle
import signal
import sys
import threading
import traceback
import types
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _read_only(contents: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(contents)


def _mapping_proxy(proxy: types.MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _read_only, (dict(proxy),)


# Results hold read-only mappings (MappingProxyType), which pickle cannot copy by itself: one
# travels as a copy of its contents, read-only again on arrival.
copyreg.pickle(types.MappingProxyType, _mapping_proxy)

_FIELDS: dict[type, tuple[str, ...]] = {}


def _rebuilt(cls: type[T], values: tuple[Any, ...]) -> T:
    obj = object.__new__(cls)
    for name, value in zip(_FIELDS[cls], values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def _field_reducer(cls: type, names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    values = operator.attrgetter(*names)
    if len(names) == 1:
        return lambda obj: (_rebuilt, (cls, (values(obj),)))
    return lambda obj: (_rebuilt, (cls, values(obj)))


def pickle_fields_directly(*classes: type) -> None:
    """Pickle instances of these dataclasses as the tuple of their field values, rebuilt
    without running `__init__` again. (A slotted dataclass otherwise pickles through Python
    code that looks its fields up for every instance: 20,000 scored episodes took 0.35 s to
    pickle and 0.28 s to unpickle that way, 0.23 s and 0.22 s this way.)"""
    for cls in classes:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS[cls] = names
        copyreg.pickle(cls, _field_reducer(cls, names))


class ShardError(RuntimeError):
    """A shard failed in a child process with an error that could not be sent back as is,
    or the child ended (was killed) before it sent its result."""


def available_cores() -> int:
    """The cores this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _child(index: int, work: Callable[[int], T], fd: int) -> None:
    try:
        try:
            payload = pickle.dumps((True, work(index)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # every failure goes back to the parent
            try:
                payload = pickle.dumps((False, exc), protocol=pickle.HIGHEST_PROTOCOL)
                pickle.loads(payload)  # some exceptions pickle but cannot be rebuilt
            except Exception:
                text = "".join(traceback.format_exception(exc))
                payload = pickle.dumps((False, ShardError(f"shard {index} failed:\n{text}")))
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
    finally:
        os._exit(0)


def _ended(pid: int, status: int) -> str:
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        hint = (
            " (out of memory? try fewer processes, e.g. --workers 1)" if name == "SIGKILL" else ""
        )
        return f"shard process {pid} was killed by {name} before it sent its result{hint}"
    return f"shard process {pid} ended (exit {os.waitstatus_to_exitcode(status)}) without a result"


def _read_result(pid: int, read_fd: int) -> tuple[bool, Any]:
    """A child's (ok, result or error), read as it is unpickled (a big result is never held
    twice); the child is reaped here."""
    with os.fdopen(read_fd, "rb") as source:
        try:
            ok, value = pickle.load(source)
        except (EOFError, pickle.UnpicklingError):  # it died before or while sending
            _, status = os.waitpid(pid, 0)
            return False, ShardError(_ended(pid, status))
    os.waitpid(pid, 0)
    return ok, value


def run_shards(count: int, work: Callable[[int], T]) -> list[T]:
    """[work(0), …, work(count - 1)], shards 1… in forked children (see the module docstring).

    Ctrl-C interrupts every shard at once (KeyboardInterrupt here, the children stopped),
    even under an event loop that would otherwise hold the signal until it runs again."""
    if count <= 1:
        return [work(0)]
    sys.stdout.flush()
    sys.stderr.flush()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if main_thread else None
    children: list[tuple[int, int]] = []
    try:
        for index in range(1, count):
            read_fd, write_fd = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                os.close(read_fd)
                os.close(write_fd)
                raise
            if pid == 0:
                os.close(read_fd)
                _child(index, work, write_fd)
            os.close(write_fd)
            children.append((pid, read_fd))
        results = [work(0)]
        failure: BaseException | None = None
        while children:
            pid, read_fd = children.pop(0)
            ok, value = _read_result(pid, read_fd)
            if ok:
                results.append(value)
            else:
                failure = failure or value
        if failure is not None:
            raise failure
        return results
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
        for pid, read_fd in children:  # this process failed first: stop and reap the rest
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            with contextlib.suppress(OSError):
                os.close(read_fd)
