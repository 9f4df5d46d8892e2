#!/usr/bin/env python3
"""The conformance kit's driver for the Python client (docs/conformance.md).

Reads the request line on stdin, calls the public API of ``monolock`` and
prints what it reported, one JSON object a line.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from typing import Any, Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import monolock  # noqa: E402

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


def main() -> None:
    req = json.loads(sys.stdin.readline())
    cmds: "queue.Queue[Optional[str]]" = queue.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            try:
                cmds.put(json.loads(line).get("cmd"))
            except ValueError:
                pass
        cmds.put(None)

    threading.Thread(target=read_commands, daemon=True).start()

    raw = bytes.fromhex(req["name_hex"])
    # Python strings cannot hold invalid UTF-8 bytes; surrogateescape turns
    # them into lone surrogates, which the client must refuse.
    name = req["name"] if "name" in req else raw.decode("utf-8", "surrogateescape")
    lease = req["lease_us"] / 1_000_000
    wait_ms = req["wait_ms"]
    wait: monolock.client.Wait = True if wait_ms < 0 else (False if wait_ms == 0 else wait_ms / 1000)
    work_stop_ms = req.get("work_stop_ms", 0)
    client = monolock.Client(req["address"])

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


if __name__ == "__main__":
    main()
