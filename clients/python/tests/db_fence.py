"""monolock.fence against real PostgreSQL and MariaDB servers, through
psycopg2 and PyMySQL (Debian's python3-psycopg2 and python3-pymysql).

The servers come from MONOLOCK_TEST_POSTGRES and MONOLOCK_TEST_MYSQL, which
internal/testsupport/testdb/withdb sets; without them the tests skip. The
module is named outside unittest's test*.py pattern because it needs those
drivers: make python-test runs it by name, under withdb, with Debian's
python3 (the interpreter the drivers are installed for)::

    python3 -m unittest tests.db_fence
"""

from __future__ import annotations

import os
import threading
import time
import unittest
import urllib.parse
import uuid
from typing import Any, Callable, Dict, List, Optional

from monolock import fence

ENV = {fence.POSTGRESQL: "MONOLOCK_TEST_POSTGRES", fence.MYSQL: "MONOLOCK_TEST_MYSQL"}


def connector(dialect: str) -> Callable[[], Any]:
    """A function that opens a new connection to the test server of
    dialect, or a skip when it is not there."""
    url = os.environ.get(ENV[dialect])
    if not url:
        raise unittest.SkipTest(f"{ENV[dialect]} is not set: run under internal/testsupport/testdb/withdb "
                                "(make python-test does)")
    try:
        if dialect == fence.POSTGRESQL:
            import psycopg2  # type: ignore[import-not-found, import-untyped, unused-ignore]

            return lambda: psycopg2.connect(url)
        import pymysql  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError as err:
        raise ImportError(f"{err}: install python3-psycopg2 and python3-pymysql (make fence-deps) "
                          "and run with the python3 they are installed for (/usr/bin/python3)") from err
    u = urllib.parse.urlsplit(url)
    return lambda: pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username,
                                   database=u.path.lstrip("/"), autocommit=False)


def stored(conn: Any, dialect: str, resource: str) -> Optional[str]:
    q = ("SELECT token::text FROM monolock_fence WHERE resource = %s" if dialect == fence.POSTGRESQL
         else "SELECT CAST(token AS CHAR) FROM monolock_fence WHERE resource = %s")
    with conn.cursor() as cur:
        cur.execute(q, (resource,))
        row = cur.fetchone()
    conn.commit()
    return None if row is None else str(row[0])


class FenceDBMixin:
    dialect = fence.POSTGRESQL
    connect: Callable[[], Any]

    # unittest.TestCase supplies these.
    assertEqual: Any
    assertRaises: Any
    assertTrue: Any
    fail: Any
    addCleanup: Any

    def setUp(self) -> None:
        self.connect = connector(self.dialect)
        self.conn = self.open()
        with self.conn.cursor() as cur:
            cur.execute(fence.schema(self.dialect))
        self.conn.commit()
        self.resource = "py-" + uuid.uuid4().hex

    def open(self) -> Any:
        conn = self.connect()
        self.addCleanup(conn.close)
        return conn

    def admit(self, token: int, conn: Any = None) -> None:
        conn = conn or self.conn
        with conn.cursor() as cur:
            fence.admit(cur, self.resource, token, dialect=self.dialect)
        conn.commit()

    def test_unsigned_order(self) -> None:
        steps = [(0, False), ((1 << 63) - 1, True), ((1 << 63) - 1, True), (1 << 63, True),
                 ((1 << 63) - 1, False), ((1 << 64) - 1, True), (1 << 63, False), ((1 << 64) - 1, True)]
        highest = None
        for i, (token, ok) in enumerate(steps):
            if ok:
                self.admit(token)
                highest = str(token)
            else:
                with self.assertRaises(fence.Stale, msg=f"step {i}: token {token}"):
                    self.admit(token)
            self.assertEqual(stored(self.conn, self.dialect, self.resource), highest, f"step {i}")

    def test_stale_rolls_back_the_write(self) -> None:
        self.admit(1 << 63)
        table = "py_writes_" + self.dialect
        with self.conn.cursor() as cur:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {table} (id VARCHAR(64) PRIMARY KEY)")
        self.conn.commit()
        with self.conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} (id) VALUES (%s)", (self.resource,))
            with self.assertRaises(fence.Stale):
                fence.admit(cur, self.resource, (1 << 63) - 1, dialect=self.dialect)
        self.conn.commit()  # nothing left to commit: admit rolled back
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {table} WHERE id = %s", (self.resource,))
            self.assertEqual(cur.fetchone()[0], 0)
        self.conn.commit()

    def test_rolled_back_admit_leaves_the_fence(self) -> None:
        self.admit(10)
        with self.conn.cursor() as cur:
            fence.admit(cur, self.resource, (1 << 64) - 1, dialect=self.dialect)
        self.conn.rollback()
        self.assertEqual(stored(self.conn, self.dialect, self.resource), "10")
        self.admit(11)

    def test_missing_table(self) -> None:
        other = "monolock_no_fence"
        with self.conn.cursor() as cur:
            if self.dialect == fence.POSTGRESQL:
                cur.execute(f"CREATE SCHEMA IF NOT EXISTS {other}")
            else:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS {other}")
        self.conn.commit()
        with self.conn.cursor() as cur:
            cur.execute(f"SET search_path TO {other}" if self.dialect == fence.POSTGRESQL else f"USE {other}")
            with self.assertRaises(fence.NoTable) as cm:
                fence.admit(cur, self.resource, 1, dialect=self.dialect)
        self.assertTrue(f"fence.schema('{self.dialect}')" in str(cm.exception))

    def levels(self) -> List[str]:
        if self.dialect == fence.POSTGRESQL:
            return ["READ COMMITTED", "REPEATABLE READ"]
        return ["REPEATABLE READ", "READ COMMITTED"]

    def set_level(self, conn: Any, level: str) -> None:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {level}"
                        if self.dialect == fence.POSTGRESQL else f"SET SESSION TRANSACTION ISOLATION LEVEL {level}")
        conn.commit()

    def session_id(self, conn: Any) -> int:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()" if self.dialect == fence.POSTGRESQL else "SELECT CONNECTION_ID()")
            sid = int(cur.fetchone()[0])
        conn.commit()
        return sid

    def await_lock_wait(self, session: int, done: threading.Event) -> None:
        """Returns once the server reports session waiting for a lock. It
        offers no notification, so this asks again: PostgreSQL every
        millisecond; InnoDB every 0.2 s, as it refreshes INNODB_TRX only when
        it was last read 0.1 s ago or more."""
        q = ("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'"
             if self.dialect == fence.POSTGRESQL else
             "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = %s "
             "AND trx_state = 'LOCK WAIT'")
        watcher = self.open()
        deadline = time.monotonic() + 60
        while True:
            with watcher.cursor() as cur:
                cur.execute(q, (session,))
                n = cur.fetchone()[0]
            watcher.commit()
            if n > 0:
                return
            if done.is_set():
                self.fail("the second admit returned without waiting for the first transaction's row lock")
            if time.monotonic() > deadline:
                self.fail(f"session {session} never waited for the row lock")
            time.sleep(0.001 if self.dialect == fence.POSTGRESQL else 0.2)

    def test_racing_holders(self) -> None:
        older, newer = (1 << 63) - 1, 1 << 63
        for level in self.levels():
            for newer_first in (False, True):
                with_level = f"{level}, {'newer' if newer_first else 'older'} first"
                self.resource = "py-" + uuid.uuid4().hex
                self.admit(1)
                first, second = (newer, older) if newer_first else (older, newer)
                c1, c2 = self.open(), self.open()
                self.set_level(c1, level)
                self.set_level(c2, level)
                session = self.session_id(c2)
                cur1 = c1.cursor()
                fence.admit(cur1, self.resource, first, dialect=self.dialect)
                result: Dict[str, Any] = {}
                done = threading.Event()

                def second_admit() -> None:
                    try:
                        with c2.cursor() as cur:
                            fence.admit(cur, self.resource, second, dialect=self.dialect)
                        c2.commit()
                        result["ok"] = True
                    except Exception as err:  # judged below
                        result["err"] = err
                    done.set()

                t = threading.Thread(target=second_admit)
                t.start()
                self.await_lock_wait(session, done)
                c1.commit()
                t.join(60)
                err = result.get("err")
                if self.dialect == fence.POSTGRESQL and level == "REPEATABLE READ":
                    self.assertTrue(err is not None and not isinstance(err, fence.Stale),
                                    f"{with_level}: {err!r}, want a serialization failure")
                elif newer_first:
                    self.assertTrue(isinstance(err, fence.Stale), f"{with_level}: {err!r}, want Stale")
                else:
                    self.assertEqual(err, None, with_level)
                want = str(newer) if newer_first or err is None else str(older)
                self.assertEqual(stored(self.conn, self.dialect, self.resource), want, with_level)


class PostgreSQLFenceTest(FenceDBMixin, unittest.TestCase):
    dialect = fence.POSTGRESQL


class MariaDBFenceTest(FenceDBMixin, unittest.TestCase):
    dialect = fence.MYSQL


if __name__ == "__main__":
    unittest.main()
