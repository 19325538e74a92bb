"""A Python callable as a target: `module:function` or `path/to/file.py:function`.

The function gets the case input, and the recorder when it takes a second parameter (or a
parameter named `recorder`):

    def run(case_input): ...                      # returns the output (or signals)
    def run(case_input, recorder): ...            # emits signals through the recorder
    async def run(case_input, recorder): ...      # async works the same way

It may return None, the output (a string or JSON value), a list of signal objects, or
`{"signals": [...], "output": ...}`.

Async functions are cancelled like any task. A synchronous function runs in a worker thread,
which Python cannot interrupt: on cancellation the recorder is cancelled (its next use raises
`CaseCancelled`) and the runner waits up to `stop_grace_s` for the thread to return. A thread
still running after that is reported in the sample's notes.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from evalstream.assertions.errors import InputError
from evalstream.connectors.targets.base import TargetCall, TargetOutput
from evalstream.connectors.targets.recorder import recording

JSON = Any


def load_callable(spec: str, base_dir: str | Path = ".") -> Callable[..., Any]:
    """Resolve `module:function` or `file.py:function` (relative to `base_dir`)."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise InputError(
            f"target {spec!r} is not `module:function` or `path/file.py:function`; "
            "for an HTTP target give a URL, for a command prefix it with `cmd:`"
        )
    if where.endswith(".py") or "/" in where:
        path = Path(where)
        if not path.is_absolute():
            path = Path(base_dir) / path
        if not path.is_file():
            raise InputError(f"target file {str(path)!r} does not exist (from target {spec!r})")
        module_name = f"evalstream_target_{abs(hash(str(path.resolve())))}"
        module = sys.modules.get(module_name)
        if module is None:
            loader_spec = importlib.util.spec_from_file_location(module_name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise InputError(f"cannot load target file {str(path)!r}")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[module_name] = module
            # Let the target import its neighbours (helpers beside it).
            sys.path.insert(0, str(path.parent.resolve()))
            try:
                loader_spec.loader.exec_module(module)
            except Exception as exc:
                del sys.modules[module_name]
                raise InputError(f"target file {str(path)!r} failed to import: {exc!r}") from exc
            finally:
                sys.path.remove(str(path.parent.resolve()))
    else:
        base = str(Path(base_dir).resolve())
        if base not in sys.path:
            sys.path.insert(0, base)
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise InputError(
                f"cannot import module {where!r} of target {spec!r}: {exc}; check the name "
                "or give a file path (`path/file.py:function`)"
            ) from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise InputError(
            f"target {spec!r}: {where} has no callable {name!r}; callables there: "
            f"{', '.join(public) or '-'}"
        )
    return cast(Callable[..., Any], fn)


def _wants_recorder(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.name == "recorder" for p in params):
        return True
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.kind == p.VAR_POSITIONAL
    ]
    return len(positional) >= 2


def split_return(value: JSON) -> TargetOutput:
    if value is None:
        return TargetOutput([])
    if isinstance(value, list) and all(isinstance(x, dict) and "name" in x for x in value):
        return TargetOutput(list(value))
    if isinstance(value, dict) and isinstance(value.get("signals"), list):
        return TargetOutput(list(value["signals"]), value.get("output"))
    return TargetOutput([], value)


class CallableTarget:
    def __init__(
        self,
        spec: str,
        fn: Callable[..., Any] | None = None,
        *,
        base_dir: str | Path = ".",
        stop_grace_s: float = 1.0,
    ) -> None:
        self.spec = spec
        self.fn = fn if fn is not None else load_callable(spec, base_dir)
        self.with_recorder = _wants_recorder(self.fn)
        self.is_async = inspect.iscoroutinefunction(self.fn)
        self.stop_grace_s = stop_grace_s
        # Our own threads, not the loop's default executor: `asyncio.run` waits for that one
        # at exit, so a target thread that ignores cancellation would hang the whole run.
        self._executor: ThreadPoolExecutor | None = None

    def describe(self) -> str:
        return f"python:{self.spec}"

    async def aclose(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def run(self, call: TargetCall) -> TargetOutput:
        args: tuple[Any, ...] = (call.input, call.recorder) if self.with_recorder else (call.input,)
        with recording(call.recorder):
            if self.is_async:
                value = await self.fn(*args)
            else:
                value = await self._in_thread(call, args)
        out = split_return(value)
        return TargetOutput([*call.recorder.signals, *out.signals], out.output)

    async def _in_thread(self, call: TargetCall, args: tuple[Any, ...]) -> JSON:
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(thread_name_prefix="evalstream-target")
        future = loop.run_in_executor(self._executor, lambda: ctx.run(self.fn, *args))
        # A thread that outlives its case must not log "exception never retrieved" later.
        future.add_done_callback(lambda f: None if f.cancelled() else f.exception())
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            call.recorder.cancel()
            done, _ = await asyncio.wait([future], timeout=self.stop_grace_s)
            call.recorder.abandoned = not done
            raise
