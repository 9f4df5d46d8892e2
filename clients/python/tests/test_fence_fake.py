"""monolock.fence against fake DB-API cursors: the statement sent, the
placeholders of each paramstyle, and the rollback on every refusal."""

from __future__ import annotations

import sys
import types
import unittest
from typing import Any, List, Optional, Tuple

from monolock import fence


class FakeConnection:
    def __init__(self) -> None:
        self.rollbacks = 0

    def rollback(self) -> None:
        self.rollbacks += 1


class FakeCursor:
    """Answers the admit statement as a server would: a row (PostgreSQL) or
    an insert id (MySQL); or raises ``fail``."""

    def __init__(self, row: Optional[Tuple[int]] = (1,), lastrowid: int = 1,
                 fail: Optional[Exception] = None) -> None:
        self.connection = FakeConnection()
        self.row = row
        self.lastrowid = lastrowid
        self.fail = fail
        self.sent: List[Tuple[str, Any]] = []

    def execute(self, sql: str, params: Any = None) -> None:
        self.sent.append((sql, params))
        if self.fail is not None:
            raise self.fail

    def fetchone(self) -> Optional[Tuple[int]]:
        return self.row


def cursor_of_driver(paramstyle: str, **kw: Any) -> FakeCursor:
    """A FakeCursor whose class lives in a fake driver module declaring
    paramstyle, as a real driver's does (fakedriver.cursors → fakedriver)."""
    pkg = types.ModuleType("fakedriver")
    pkg.paramstyle = paramstyle  # type: ignore[attr-defined]
    sub = types.ModuleType("fakedriver.cursors")
    sys.modules["fakedriver"], sys.modules["fakedriver.cursors"] = pkg, sub
    cls = type("Cursor", (FakeCursor,), {"__module__": "fakedriver.cursors"})
    return cls(**kw)


class FenceFakeTest(unittest.TestCase):
    def tearDown(self) -> None:
        sys.modules.pop("fakedriver", None)
        sys.modules.pop("fakedriver.cursors", None)

    def test_admitted_sends_token_as_text(self) -> None:
        cur = FakeCursor()
        fence.admit(cur, "r", (1 << 64) - 1)
        sql, params = cur.sent[0]
        self.assertIn("ON CONFLICT (resource) DO UPDATE", sql)
        self.assertIn("%s::numeric(20,0)", sql)
        self.assertEqual(params, ("r", "18446744073709551615"))
        self.assertEqual(cur.connection.rollbacks, 0)

    def test_stale_rolls_back(self) -> None:
        cur = FakeCursor(row=None)
        with self.assertRaises(fence.Stale) as cm:
            fence.admit(cur, "r", 1 << 63)
        self.assertEqual((cm.exception.resource, cm.exception.token), ("r", 1 << 63))
        self.assertIn("stale token 9223372036854775808 for 'r'", str(cm.exception))
        self.assertEqual(cur.connection.rollbacks, 1)

    def test_mysql_reads_the_insert_id(self) -> None:
        cur = FakeCursor(lastrowid=1)
        fence.admit(cur, "r", 5, dialect="mysql")
        self.assertIn("LAST_INSERT_ID", cur.sent[0][0])
        stale = FakeCursor(lastrowid=0)
        with self.assertRaises(fence.Stale):
            fence.admit(stale, "r", 5, dialect="mysql")
        self.assertEqual(stale.connection.rollbacks, 1)

    def test_zero_is_never_admitted_and_sends_nothing(self) -> None:
        cur = FakeCursor()
        with self.assertRaises(fence.Stale) as cm:
            fence.admit(cur, "r", 0)
        self.assertIn("token 0", str(cm.exception))
        self.assertEqual(cur.sent, [])
        self.assertEqual(cur.connection.rollbacks, 1)

    def test_bad_input_is_refused_before_sending(self) -> None:
        cur = FakeCursor()
        for token in (-1, 1 << 64, True, "5"):
            with self.assertRaises(ValueError):
                fence.admit(cur, "r", token)  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            fence.admit(cur, "r", 1, dialect="sqlite")
        no_conn = FakeCursor()
        del no_conn.connection
        with self.assertRaises(TypeError):
            fence.admit(no_conn, "r", 1)
        self.assertEqual(cur.sent, [])

    def test_missing_table_says_what_to_run(self) -> None:
        cur = FakeCursor(fail=RuntimeError('relation "monolock_fence" does not exist'))
        with self.assertRaises(fence.NoTable) as cm:
            fence.admit(cur, "r", 1)
        self.assertIn("fence.schema('postgresql')", str(cm.exception))
        self.assertIsInstance(cm.exception.__cause__, RuntimeError)
        self.assertEqual(cur.connection.rollbacks, 1)

    def test_other_errors_roll_back_and_propagate(self) -> None:
        cur = FakeCursor(fail=ConnectionError("gone"))
        with self.assertRaises(ConnectionError):
            fence.admit(cur, "r", 1, dialect="mysql")
        self.assertEqual(cur.connection.rollbacks, 1)

    def test_paramstyles(self) -> None:
        cases = {
            "qmark": ("VALUES (?, ?::numeric", ("r", "7")),
            "numeric": ("VALUES (:1, :2::numeric", ("r", "7")),
            "named": ("VALUES (:resource, :token::numeric", {"resource": "r", "token": "7"}),
            "pyformat": ("VALUES (%(resource)s, %(token)s::numeric", {"resource": "r", "token": "7"}),
            "format": ("VALUES (%s, %s::numeric", ("r", "7")),
        }
        for style, (fragment, params) in cases.items():
            with self.subTest(style):
                cur = cursor_of_driver(style)
                fence.admit(cur, "r", 7)
                self.assertIn(fragment, cur.sent[0][0])
                self.assertEqual(cur.sent[0][1], params)

    def test_schema(self) -> None:
        self.assertIn("numeric(20,0)", fence.schema("postgresql"))
        self.assertIn("BIGINT UNSIGNED", fence.schema("mysql"))
        self.assertNotIn("bigint", fence.schema("postgresql").lower().replace("numeric", ""))
        with self.assertRaises(ValueError):
            fence.schema("oracle")


if __name__ == "__main__":
    unittest.main()
