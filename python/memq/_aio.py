"""asyncio glue: one reactor per event loop (see the native module's ``aio`` docs).

memq wakes the reactor from any thread by writing a byte to a socket; the loop watches
that socket with ``add_reader`` and, when it is readable, completes the futures of the
awaitables woken. Nothing here runs a thread."""

from __future__ import annotations

import asyncio
import weakref

from ._memq import Reactor

_reactors: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Reactor]" = (
    weakref.WeakKeyDictionary()
)


def _reactor() -> Reactor:
    loop = asyncio.get_running_loop()
    r = _reactors.get(loop)
    if r is None:
        r = Reactor()
        loop.add_reader(r.fileno(), r.drain)
        _reactors[loop] = r
        # Stop watching when the loop closes (the socket closes with the reactor).
        _patch_close(loop, r)
    return r


def _patch_close(loop: asyncio.AbstractEventLoop, r: Reactor) -> None:
    close = loop.close

    def closing() -> None:
        try:
            loop.remove_reader(r.fileno())
        except Exception:  # the loop may be half closed already
            pass
        _reactors.pop(loop, None)
        close()

    loop.close = closing  # type: ignore[method-assign]
