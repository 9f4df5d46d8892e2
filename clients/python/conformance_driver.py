#!/usr/bin/env python3
"""The conformance kit's driver for the Python client (docs/conformance.md).

Reads the request line on stdin, calls the public API of ``monolock`` (with
``--aio``: of ``monolock.aio``) and prints what it reported, one JSON object
a line.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import ssl
import sys
import threading
import time
from typing import Any, Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import monolock  # noqa: E402
import monolock.aio  # noqa: E402

_out = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps(dict(event=event, **fields))
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def report(err: BaseException) -> None:
    """An attempt that failed before the grant."""
    if isinstance(err, monolock.InvalidInput):
        emit("invalid-input", reason=str(err))
    elif isinstance(err, monolock.ServerError):
        emit("error", code=err.code, retriable=False, reason=err.reason)
    elif isinstance(err, monolock.Unavailable) and err.code is not None:
        emit("error", code=err.code, retriable=True, reason=err.reason or "")
    elif isinstance(err, monolock.Busy):
        emit("busy")
    else:
        emit("unavailable", reason=str(err))


def lost(err: Optional[monolock.MonolockError]) -> None:
    fields: Dict[str, Any] = {"reason": str(err)}
    code = getattr(err, "code", None)
    if isinstance(code, int):
        fields["code"] = code
    emit("lost", **fields)


def request_args(req: Dict[str, Any]) -> "tuple[str, float, monolock.client.Wait, int]":
    raw = bytes.fromhex(req["name_hex"])
    # Python strings cannot hold invalid UTF-8 bytes; surrogateescape turns
    # them into lone surrogates, which the client must refuse.
    name = req["name"] if "name" in req else raw.decode("utf-8", "surrogateescape")
    wait_ms = req["wait_ms"]
    wait: monolock.client.Wait = True if wait_ms < 0 else (False if wait_ms == 0 else wait_ms / 1000)
    return name, req["lease_us"] / 1_000_000, wait, req.get("work_stop_ms", 0)


def ssl_context(req: Dict[str, Any]) -> Optional[ssl.SSLContext]:
    """The request's TLS files as a user would load them; None for plain TCP."""
    files = req.get("tls")
    if not files:
        return None
    ctx = ssl.create_default_context(cafile=files["ca_file"])
    if files.get("cert_file"):
        ctx.load_cert_chain(files["cert_file"], files["key_file"])
    return ctx


def main() -> None:
    req = json.loads(sys.stdin.readline())
    if "--aio" in sys.argv[1:]:
        asyncio.run(amain(req))
        return
    cmds: "queue.Queue[Optional[str]]" = queue.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            try:
                cmds.put(json.loads(line).get("cmd"))
            except ValueError:
                pass
        cmds.put(None)

    threading.Thread(target=read_commands, daemon=True).start()

    name, lease, wait, work_stop_ms = request_args(req)
    client = monolock.Client(req.get("addresses") or req["address"], ssl_context=ssl_context(req))

    def hold(lock: monolock.Lock) -> bool:
        """The work: runs until the kit asks for the release (True) or the
        lock is lost; then takes work_stop_ms to stop (False)."""
        released = threading.Event()

        def watch() -> None:
            lock.lost.wait()
            cmds.put("__lost__")

        threading.Thread(target=watch, daemon=True).start()
        while True:
            cmd = cmds.get()
            if cmd == "release" or cmd is None:
                released.set()
                return cmd == "release"
            if cmd == "__lost__" and lock.error is not None:
                break
        lost(lock.error)
        if work_stop_ms < 0:
            cmd = cmds.get()
            while cmd == "__lost__":
                cmd = cmds.get()
            emit("work-stopped")
            return cmd == "release"
        time.sleep(work_stop_ms / 1000)
        emit("work-stopped")
        return False

    def drain(lock: Optional[monolock.Lock]) -> None:
        while True:
            cmd = cmds.get()
            if cmd is None:
                return
            if cmd == "release":
                if lock is not None:
                    lock.release()
                emit("released")

    if req["mode"] == "acquire":
        try:
            lock = client.acquire(name, lease=lease, wait=wait)
        except monolock.MonolockError as e:
            report(e)
            drain(None)
            return
        emit("acquired", token=str(lock.token))
        asked = hold(lock)
        lock.release()
        if asked:
            emit("released")
        drain(lock)
    elif req["mode"] == "run":
        state = {"called": False, "released": False}

        def work(lock: monolock.Lock) -> None:
            state["called"] = True
            emit("acquired", token=str(lock.token))
            state["released"] = hold(lock)

        try:
            client.run(name, work, lease=lease, wait=wait)
        except monolock.LockLost:
            pass
        except monolock.MonolockError as e:
            if not state["called"]:
                report(e)
        if state["released"]:
            emit("released")
        drain(None)
    else:
        print(f"conformance_driver: unknown mode {req['mode']!r}", file=sys.stderr)
        sys.exit(2)


async def amain(req: Dict[str, Any]) -> None:
    """The same life as main(), with the asyncio client."""
    loop = asyncio.get_running_loop()
    cmds: "asyncio.Queue[Optional[str]]" = asyncio.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            try:
                cmd = json.loads(line).get("cmd")
            except ValueError:
                continue
            loop.call_soon_threadsafe(cmds.put_nowait, cmd)
        loop.call_soon_threadsafe(cmds.put_nowait, None)

    threading.Thread(target=read_commands, daemon=True).start()
    name, lease, wait, work_stop_ms = request_args(req)
    client = monolock.aio.Client(req.get("addresses") or req["address"], ssl_context=ssl_context(req))

    async def hold(lock: monolock.aio.Lock) -> bool:
        lost_wait = asyncio.ensure_future(lock.lost.wait())
        while True:
            get = asyncio.ensure_future(cmds.get())
            done, _ = await asyncio.wait({get, lost_wait}, return_when=asyncio.FIRST_COMPLETED)
            if get in done:
                cmd = get.result()
                if cmd == "release" or cmd is None:
                    lost_wait.cancel()
                    return cmd == "release"
                continue
            get.cancel()
            break
        lost(lock.error)
        if work_stop_ms < 0:
            cmd = await cmds.get()
            emit("work-stopped")
            return cmd == "release"
        await asyncio.sleep(work_stop_ms / 1000)
        emit("work-stopped")
        return False

    async def drain(lock: Optional[monolock.aio.Lock]) -> None:
        while True:
            cmd = await cmds.get()
            if cmd is None:
                return
            if cmd == "release":
                if lock is not None:
                    await lock.release()
                emit("released")

    if req["mode"] == "acquire":
        try:
            lock = await client.acquire(name, lease=lease, wait=wait)
        except monolock.MonolockError as e:
            report(e)
            await drain(None)
            return
        emit("acquired", token=str(lock.token))
        asked = await hold(lock)
        await lock.release()
        if asked:
            emit("released")
        await drain(lock)
        return
    state = {"called": False, "released": False}

    async def work(lock: monolock.aio.Lock) -> None:
        state["called"] = True
        emit("acquired", token=str(lock.token))
        state["released"] = await hold(lock)

    try:
        await client.run(name, work, lease=lease, wait=wait)
    except monolock.LockLost:
        pass
    except monolock.MonolockError as e:
        if not state["called"]:
            report(e)
    if state["released"]:
        emit("released")
    await drain(None)


if __name__ == "__main__":
    main()
