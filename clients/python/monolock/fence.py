"""Fencing tokens checked where the write lands: the SQL contract of
docs/fencing.md for any DB-API 2.0 cursor (standard library only).

Run :func:`admit` inside the transaction that does the guarded write, before
the write::

    from monolock import fence

    with client.lock("reports") as lock:
        cur = conn.cursor()
        fence.admit(cur, "reports", lock.token, dialect="postgresql")
        cur.execute("UPDATE reports SET body = %s WHERE day = %s", (body, day))
        conn.commit()

A refused admit rolls the transaction back (``cursor.connection.rollback()``)
and raises :class:`Stale`; any other failure rolls back and raises too.
Tokens are unsigned 64-bit and cross the driver as decimal text.
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

from .errors import MonolockError

__all__ = ["POSTGRESQL", "MYSQL", "TABLE", "Stale", "NoTable", "schema", "admit_statement", "admit"]

POSTGRESQL = "postgresql"
MYSQL = "mysql"  # MySQL and MariaDB
TABLE = "monolock_fence"

_MAX_TOKEN = (1 << 64) - 1


class Stale(MonolockError):
    """The token was refused: a newer holder's token was admitted for the
    resource, so the lock was handed on and the write must not land. The
    transaction has been rolled back. ``resource`` and ``token`` say which."""

    def __init__(self, resource: str, token: int) -> None:
        if token == 0:
            msg = (f"fence: token 0 for {resource!r} is never issued by a monolock server: "
                   "pass the token of the lock you hold")
        else:
            msg = (f"fence: stale token {token} for {resource!r}: a larger token was admitted, "
                   "so the lock was handed on; stop the work and take the lock again")
        super().__init__(msg)
        self.resource = resource
        self.token = token


class NoTable(MonolockError):
    """The fence table does not exist: create it with :func:`schema`. The
    transaction has been rolled back; the driver's error is ``__cause__``."""


_SCHEMA = {
    POSTGRESQL: """CREATE TABLE IF NOT EXISTS monolock_fence (
    resource text PRIMARY KEY,
    token    numeric(20,0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615)
)""",
    MYSQL: """CREATE TABLE IF NOT EXISTS monolock_fence (
    resource VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    token    BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB""",
}

# {r} and {t} are the resource's and the token's placeholders.
_ADMIT = {
    POSTGRESQL: """INSERT INTO monolock_fence AS f (resource, token) VALUES ({r}, {t}::numeric(20,0))
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
RETURNING 1""",
    MYSQL: """INSERT INTO monolock_fence (resource, token) VALUES ({r}, IF(LAST_INSERT_ID(1), CAST({t} AS UNSIGNED), 0))
ON DUPLICATE KEY UPDATE token = IF(LAST_INSERT_ID(token <= VALUES(token)), VALUES(token), token)""",
}


def _check_dialect(dialect: str) -> None:
    if dialect not in _SCHEMA:
        raise ValueError(f"fence: unknown dialect {dialect!r}: use {POSTGRESQL!r} or {MYSQL!r}")


def schema(dialect: str) -> str:
    """The statement that creates the fence table for ``dialect``
    (``"postgresql"`` or ``"mysql"``); safe to run again."""
    _check_dialect(dialect)
    return _SCHEMA[dialect]


def admit_statement(dialect: str, paramstyle: str = "format") -> str:
    """The admit statement for ``dialect`` with DB-API ``paramstyle``
    placeholders (its parameters: the resource, then the token as decimal
    text; ``named`` and ``pyformat`` name them ``resource`` and ``token``)."""
    _check_dialect(dialect)
    styles = {
        "format": ("%s", "%s"),
        "qmark": ("?", "?"),
        "numeric": (":1", ":2"),
        "named": (":resource", ":token"),
        "pyformat": ("%(resource)s", "%(token)s"),
    }
    if paramstyle not in styles:
        raise ValueError(f"fence: unknown paramstyle {paramstyle!r}: one of {', '.join(styles)}")
    r, t = styles[paramstyle]
    return _ADMIT[dialect].format(r=r, t=t)


def _paramstyle(cursor: Any) -> str:
    """The paramstyle of the driver whose cursor this is: the module
    attribute DB-API 2.0 requires, found on the cursor's module or a parent
    package (psycopg2.extensions → psycopg2). "format" when none says."""
    name = type(cursor).__module__
    while name:
        style = getattr(sys.modules.get(name), "paramstyle", None)
        if isinstance(style, str):
            return style
        name = name.rpartition(".")[0]
    return "format"


def _params(style: str, resource: str, token: str) -> Any:
    if style in ("named", "pyformat"):
        return {"resource": resource, "token": token}
    return (resource, token)


def _is_token(value: object) -> bool:
    """Whether value is an int in 0..2^64 − 1 (bool is no token)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_TOKEN


def _missing_table(err: BaseException) -> bool:
    msg = str(err)
    return TABLE in msg and ("does not exist" in msg or "doesn't exist" in msg)


def admit(cursor: Any, resource: str, token: int, dialect: str = POSTGRESQL) -> None:
    """Admit ``token`` for ``resource`` in the cursor's transaction: one
    statement, which records the token when it is ≥ the stored one and holds
    the resource's row lock until the transaction ends.

    Raises :class:`Stale` for a stale token (or 0), :class:`NoTable` when the
    fence table is missing, and the driver's error for any other failure;
    each time after ``cursor.connection.rollback()``, so nothing of the
    transaction lands. ``ValueError`` for a token outside 1..2^64 − 1 or an
    unknown dialect, ``TypeError`` for a cursor without ``.connection``
    (raised before anything is sent).
    """
    _check_dialect(dialect)
    if not _is_token(token):
        raise ValueError(f"fence: token {token!r} is not an unsigned 64-bit integer: pass the lock's token")
    conn = getattr(cursor, "connection", None)
    if conn is None:
        raise TypeError("fence.admit needs a DB-API cursor with .connection (the optional extension that "
                        "psycopg2, psycopg, PyMySQL, mysqlclient and mysql-connector provide), "
                        "to roll back a refused admit")
    if token == 0:
        conn.rollback()
        raise Stale(resource, token)
    style = _paramstyle(cursor)
    try:
        cursor.execute(admit_statement(dialect, style), _params(style, resource, str(token)))
        admitted = _admitted(cursor, dialect)
    except Exception as err:
        conn.rollback()
        if _missing_table(err):
            raise NoTable(f"fence: the fence table {TABLE} does not exist: create it with "
                          f"fence.schema({dialect!r}) ({err})") from err
        raise
    if not admitted:
        conn.rollback()
        raise Stale(resource, token)


def _admitted(cursor: Any, dialect: str) -> bool:
    if dialect == POSTGRESQL:
        row: Optional[Sequence[Any]] = cursor.fetchone()
        return row is not None
    # The MySQL statement sets LAST_INSERT_ID to 1 (admitted) or 0 (stale);
    # the server returns it as the insert id.
    return cursor.lastrowid == 1
