"""What tooz's acquire+release costs through the monolock driver and through
tooz's own PostgreSQL driver, side by side in one run. ``make tooz-bench``
runs it as ``python -m tests_tooz.bench`` from clients/python, in
bin/tooz-bench-venv (tooz-requirements.txt plus psycopg2 from
tooz-bench-requirements.txt), under bin/withdb, which exports
MONOLOCK_TEST_POSTGRES naming a throwaway PostgreSQL.

It starts bin/monolock on 127.0.0.1 port 0 (tests.support.Server, as the
tooz suite does) and measures, per backend:

- uncontended: ``with lock:`` on one name from one coordinator, after a
  warm-up, in rounds that alternate the two backends (ABBA), so that the
  machine's other load falls on both alike: cycles, median and p99 wall
  time per cycle, cycles/s, and this process's CPU per cycle;
- contended: two processes each running ``with lock:`` on one name as fast
  as they can, so the lock passes between them: cycles/s of both together
  and the median wall time per cycle;
- failover: a holder process is killed (SIGKILL: the kernel closes its
  connection) or frozen (SIGSTOP: its connection stays open and silent, as
  when its host dies or is cut off) while a second process waits for the
  lock: the time from the signal until the waiter holds the lock, or
  "not within LIMIT".

It reports and judges no speed; it fails when a backend cannot be reached or
a step that takes milliseconds (a holder taking the lock, a waiter queueing)
has not happened within STEP_LIMIT.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import statistics
import sys
import time
import unittest
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import tooz.coordination

from tests.support import Server
from tests_tooz.suite import terminate

LOCK = b"tooz-bench"
MONOLOCK_LEASE = 2.0  # seconds: the driver's default
# How long a step that should take milliseconds may take before the run
# fails: a holder taking the lock, a waiter showing up in the queue.
STEP_LIMIT = 30.0


def coordinator(url: str, member: bytes) -> Any:
    c = tooz.coordination.get_coordinator(url, member)
    c.start()
    return c


def postgres_url(env_url: str) -> str:
    """tooz's postgresql:// URL of withdb's postgres://USER@HOST:PORT/DB?sslmode=disable
    (tooz's driver takes host, port, user and database from the URL)."""
    u = urllib.parse.urlsplit(env_url)
    if u.scheme not in ("postgres", "postgresql") or not u.hostname or not u.port:
        raise SystemExit(f"tooz-bench: MONOLOCK_TEST_POSTGRES={env_url!r} is not postgres://USER@HOST:PORT/DB: run under bin/withdb")
    user = f"{u.username}@" if u.username else ""
    return f"postgresql://{user}{u.hostname}:{u.port}{u.path or '/postgres'}"


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile p (0..100) of a sorted list."""
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


@dataclass
class Uncontended:
    durations_ns: List[int]
    cpu_s: float = 0.0

    def row(self, name: str) -> str:
        d = sorted(self.durations_ns)
        total_s = sum(d) / 1e9
        return (f"{name:<11} {len(d):>7,} {statistics.median(d) / 1e3:>10.0f} {percentile(d, 99) / 1e3:>8.0f}"
                f" {len(d) / total_s:>9,.0f} {self.cpu_s / len(d) * 1e6:>10.0f}")


def cycles(lock: Any, n: int, out: Optional[List[int]]) -> None:
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        with lock:
            pass
        if out is not None:
            out.append(clock() - t0)


def run_uncontended(urls: Dict[str, str], per_backend: int, rounds: int, warmup: int) -> Dict[str, Uncontended]:
    locks = {name: coordinator(url, b"uncontended").get_lock(LOCK) for name, url in urls.items()}
    results = {name: Uncontended([]) for name in urls}
    for lock in locks.values():
        cycles(lock, warmup, None)
    per_round = max(1, per_backend // rounds)
    order = list(urls)
    for r in range(rounds):
        for name in order if r % 2 == 0 else reversed(order):
            res = results[name]
            c0 = time.process_time()
            cycles(locks[name], per_round, res.durations_ns)
            res.cpu_s += time.process_time() - c0
    return results


# --- the child processes (multiprocessing, spawn: no threads inherited) -----

def contender(url: str, member: bytes, n: int, ready: Any, go: Any, out: Any) -> None:
    lock = coordinator(url, member).get_lock(LOCK)
    cycles(lock, 20, None)
    ready.set()
    go.wait()
    d: List[int] = []
    t0 = time.monotonic()
    cycles(lock, n, d)
    out.put((t0, time.monotonic(), d))


def holder(url: str, held: Any) -> None:
    lock = coordinator(url, b"holder").get_lock(LOCK)
    lock.acquire()
    held.set()
    while True:  # killed or frozen by the parent
        signal.pause()


def waiter(url: str, about_to_wait: Any, out: Any) -> None:
    c = coordinator(url, b"waiter")
    lock = c.get_lock(LOCK)
    about_to_wait.set()
    lock.acquire()
    out.put(time.monotonic())
    lock.release()
    c.stop()


def run_contended(ctx: Any, url: str, n: int) -> Tuple[int, float, float]:
    """(cycles, cycles/s of both, median µs per cycle)."""
    ready = [ctx.Event(), ctx.Event()]
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=contender, args=(url, f"c{i}".encode(), n, ready[i], go, out)) for i in range(2)]
    try:
        for p in procs:
            p.start()
        for e in ready:
            if not e.wait(STEP_LIMIT):
                raise SystemExit(f"tooz-bench: a contender did not start within {STEP_LIMIT:g} s ({url})")
        go.set()
        got = [out.get(timeout=600) for _ in procs]
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    start, end = min(g[0] for g in got), max(g[1] for g in got)
    d = sorted(x for g in got for x in g[2])
    return len(d), len(d) / (end - start), statistics.median(d) / 1e3


def await_condition(what: str, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + STEP_LIMIT
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"tooz-bench: {what} did not happen within {STEP_LIMIT:g} s")
        time.sleep(0.001)


def run_failover(ctx: Any, url: str, sig: int, queued: Callable[[], bool], limit: float) -> Optional[float]:
    """Seconds from sig to the holder until the queued waiter holds the lock,
    None when not within limit."""
    held, about, out = ctx.Event(), ctx.Event(), ctx.Queue()
    h = ctx.Process(target=holder, args=(url, held))
    w = ctx.Process(target=waiter, args=(url, about, out))
    try:
        h.start()
        if not held.wait(STEP_LIMIT):
            raise SystemExit(f"tooz-bench: the holder did not take the lock within {STEP_LIMIT:g} s ({url})")
        w.start()
        if not about.wait(STEP_LIMIT):
            raise SystemExit(f"tooz-bench: the waiter did not start within {STEP_LIMIT:g} s ({url})")
        await_condition("the waiter's place in the queue", queued)
        assert h.pid is not None
        t0 = time.monotonic()
        os.kill(h.pid, sig)
        try:
            return out.get(timeout=limit) - t0
        except Exception:  # queue.Empty
            return None
    finally:
        for p in (h, w):
            p.kill()  # SIGKILL ends a stopped process too
            p.join()


def monolock_queued(server: Server, name: str) -> Callable[[], bool]:
    return lambda: server.waiters(name) >= 1


def postgres_queued(env_url: str) -> Callable[[], bool]:
    import psycopg2  # only in bin/tooz-bench-venv

    def queued() -> bool:
        conn = psycopg2.connect(env_url)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
                row = cur.fetchone()
                return row is not None and int(row[0]) >= 1
        finally:
            conn.close()

    return queued


def main() -> int:
    ap = argparse.ArgumentParser(description="tooz acquire+release: the monolock driver vs tooz's PostgreSQL driver")
    ap.add_argument("--cycles", type=int, default=4000, help="uncontended cycles per backend (default 4000)")
    ap.add_argument("--rounds", type=int, default=20, help="rounds the uncontended cycles are split into, alternating the backends (default 20)")
    ap.add_argument("--warmup", type=int, default=200, help="uncontended cycles per backend before measuring (default 200)")
    ap.add_argument("--contended", type=int, default=1000, help="cycles per process of the two contending processes (default 1000; 0: skip)")
    ap.add_argument("--failover", type=int, default=3, help="rounds of each failover case per backend (default 3; 0: skip)")
    ap.add_argument("--failover-limit", type=float, default=10.0, help="seconds to wait for the waiter after the signal (default 10)")
    args = ap.parse_args()
    # withdb passes a termination on: stop the server and the children on the way out.
    signal.signal(signal.SIGTERM, terminate)
    env_pg = os.environ.get("MONOLOCK_TEST_POSTGRES")
    if not env_pg:
        print("tooz-bench: MONOLOCK_TEST_POSTGRES is not set: run under bin/withdb (make tooz-bench does)", file=sys.stderr)
        return 2

    owner = unittest.TestCase()  # Server takes a TestCase for its cleanup
    try:
        server = Server(owner)
        urls = {
            "monolock": f"monolock://{server.addr}?lease={MONOLOCK_LEASE:g}",
            "postgresql": postgres_url(env_pg),
        }
        load0 = os.getloadavg()
        print(f"tooz-bench: tooz {_tooz_version()}, {' vs '.join(f'{k} {v}' for k, v in urls.items())}")
        print(f"load average at the start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} ({os.cpu_count()} CPUs)")

        res = run_uncontended(urls, args.cycles, args.rounds, args.warmup)
        print(f"\nuncontended `with lock:` on one name, one coordinator per backend, {args.rounds} rounds alternating"
              f" the backends, after {args.warmup} warm-up cycles each")
        print(f"{'backend':<11} {'cycles':>7} {'median µs':>10} {'p99 µs':>8} {'cycles/s':>9} {'CPU µs/cyc':>10}")
        for name, r in res.items():
            print(r.row(name))
        m, p = (statistics.median(res[k].durations_ns) for k in ("monolock", "postgresql"))
        print(f"median per cycle, monolock / postgresql: {m / p:.2f}x")

        ctx = mp.get_context("spawn")
        if args.contended > 0:
            print(f"\ncontended: two processes, {args.contended:,} `with lock:` cycles each on one name")
            print(f"{'backend':<11} {'cycles':>7} {'cycles/s':>9} {'median µs':>10}")
            for name, url in urls.items():
                n, rate, med = run_contended(ctx, url, args.contended)
                print(f"{name:<11} {n:>7,} {rate:>9,.0f} {med:>10.0f}")

        if args.failover > 0:
            queued = {"monolock": monolock_queued(server, LOCK.decode()), "postgresql": postgres_queued(env_pg)}
            print(f"\nfailover: the holder is signalled while a waiter is queued; ms until the waiter holds"
                  f" (monolock lease {MONOLOCK_LEASE:g} s; limit {args.failover_limit:g} s)")
            for sig in (signal.SIGKILL, signal.SIGSTOP):
                for name, url in urls.items():
                    got = [run_failover(ctx, url, sig, queued[name], args.failover_limit) for _ in range(args.failover)]
                    shown = ", ".join("not within limit" if g is None else f"{g * 1e3:.0f}" for g in got)
                    print(f"{signal.Signals(sig).name:<8} {name:<11} {shown}")

        load1 = os.getloadavg()
        print(f"\nload average at the end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    finally:
        owner.doCleanups()
    return 0


def _tooz_version() -> str:
    from importlib.metadata import version

    return version("tooz")


if __name__ == "__main__":
    sys.exit(main())
