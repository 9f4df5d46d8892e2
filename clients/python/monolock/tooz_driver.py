"""A tooz driver for monolock: ``monolock://HOST:PORT?admin=HOST:PORT&lease=SECONDS``.

tooz loads this module through the ``monolock`` entry point of the
``tooz.backends`` group (``pip install 'monolock[tooz]'``); nothing else
imports it, so the plain ``monolock`` package never needs tooz. Only locks are
implemented: groups, membership and elections raise ``tooz.NotImplemented``.
docs/integrations.md (section "tooz") has the user's side: the URL, an
example, the semantics and the admin roles.

Each ``Lock.acquire`` is one claim of the threaded client: its own connection,
a place in the lock's FIFO queue, a background thread that heartbeats (so the
coordinator needs no ``heartbeat()`` calls) and a fencing token
(``MonolockLock.token``). ``break_`` force-releases through the admin API.
"""

from __future__ import annotations

import hashlib
import http.client
import math
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, NoReturn, Optional, Set, Tuple, Union

import tooz
from tooz import coordination, locking, utils

from . import Busy, CertificateRefused, Client, MonolockError, Unavailable
from . import Lock as ClientLock

__all__ = ["MonolockDriver", "MonolockLock", "Settings", "parse_settings", "lock_name", "HASHED_PREFIX"]

# A tooz name that monolock cannot take as it is (not UTF-8, longer than 255
# bytes, empty) becomes HASHED_PREFIX + the SHA-256 of its bytes in lower-case
# hex (76 characters). A name that itself starts with HASHED_PREFIX is hashed
# too, so two different tooz names never share one monolock lock.
HASHED_PREFIX = "tooz-sha256/"
MAX_NAME_BYTES = 255

DEFAULT_LEASE = 2.0  # seconds: the client's default
MAX_LEASE = 0xFFFFFFFF / 1000  # the protocol's longest lease, in seconds
DEFAULT_CONNECT_TIMEOUT = 10.0
# The admin API answers within its own 10 s call timeout; this bounds each
# connect, send and read of a call beyond that.
ADMIN_TIMEOUT = 15.0
# An admin answer is a small JSON object; more than this is not read.
ADMIN_MAX_BODY = 64 * 1024

_OPTIONS = (
    "lease", "connect_timeout", "tls", "tls_ca", "tls_cert", "tls_key",
    "admin", "admin_tls_ca", "admin_tls_cert", "admin_tls_key", "timeout",
)


def lock_name(name: Union[bytes, str]) -> str:
    """The monolock lock name of a tooz lock name: the name itself when it is
    1 to 255 bytes of UTF-8 and does not start with HASHED_PREFIX, otherwise
    HASHED_PREFIX + hex(SHA-256(name)). A str is taken as its UTF-8 bytes."""
    raw = name.encode("utf-8", "surrogatepass") if isinstance(name, str) else bytes(name)
    try:
        text: Optional[str] = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or not raw or len(raw) > MAX_NAME_BYTES or text.startswith(HASHED_PREFIX):
        return HASHED_PREFIX + hashlib.sha256(raw).hexdigest()
    return text


@dataclass(frozen=True)
class Settings:
    """What a ``monolock://`` URL says."""

    addr: str  # host:port of the lock port, [v6]:port for IPv6
    lease: float = DEFAULT_LEASE
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    tls: bool = False
    tls_ca: Optional[str] = None
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None
    admin: Optional[str] = None  # host:port of the admin API, None: no break_()
    admin_tls_ca: Optional[str] = None
    admin_tls_cert: Optional[str] = None
    admin_tls_key: Optional[str] = None

    @property
    def admin_https(self) -> bool:
        """The admin API is spoken over HTTPS when any admin_tls_* is given."""
        return bool(self.admin_tls_ca or self.admin_tls_cert or self.admin_tls_key)


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bad(message: str) -> NoReturn:
    raise tooz.ToozError(f"monolock tooz URL: {message}")


def _seconds(key: str, value: str, most: float) -> float:
    try:
        s = float(value)
    except ValueError:
        _bad(f"{key}={value!r} is not a number of seconds: write for example {key}=2.5")
    if not math.isfinite(s) or s <= 0 or s > most:
        _bad(f"{key}={value!r} must be more than 0 and at most {most:g} seconds")
    return s


def _address(key: str, value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        _bad(f"{key}={value!r} is not HOST:PORT: write for example {key}=127.0.0.1:7071 ([::1]:7071 for IPv6)")
    return value


def _flag(key: str, value: str) -> bool:
    v = value.lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    _bad(f"{key}={value!r} is not a boolean: write {key}=true or {key}=false")


def parse_settings(host: Optional[str], port: Optional[int], options: Dict[str, Any]) -> Settings:
    """The settings of ``monolock://host:port?options``. options are tooz's:
    each value a list of the query's values (the last one counts) or, for the
    keyword arguments of get_coordinator, a single value. Raises ToozError
    naming what is wrong. A path is ignored; so is ``timeout``, tooz's
    membership timeout, as this driver has no groups."""
    if not host or port is None:
        _bad("the address is missing: write monolock://HOST:PORT (for example monolock://127.0.0.1:7070)")
    flat: Dict[str, Any] = utils.collapse(options)
    unknown = sorted(k for k in flat if k not in _OPTIONS)
    if unknown:
        _bad(f"unknown option {', '.join(unknown)}: the options are {', '.join(_OPTIONS)}")
    opt: Dict[str, str] = {k: str(v) for k, v in flat.items()}

    def path(key: str) -> Optional[str]:
        v = opt.get(key)
        if v is not None and not v:
            _bad(f"{key}= is empty: give the path of a PEM file, or leave {key} out")
        return v

    tls_ca, tls_cert, tls_key = path("tls_ca"), path("tls_cert"), path("tls_key")
    admin_tls_ca, admin_tls_cert, admin_tls_key = path("admin_tls_ca"), path("admin_tls_cert"), path("admin_tls_key")
    if tls_key and not tls_cert:
        _bad("tls_key is given without tls_cert: give the client certificate too")
    if admin_tls_key and not admin_tls_cert:
        _bad("admin_tls_key is given without admin_tls_cert: give the operator certificate too")
    tls = _flag("tls", opt["tls"]) if "tls" in opt else bool(tls_ca or tls_cert)
    if not tls and (tls_ca or tls_cert):
        _bad("tls=false with tls_ca or tls_cert: drop tls=false, or the tls_* files")
    admin = _address("admin", opt["admin"]) if "admin" in opt else None
    if admin is None and (admin_tls_ca or admin_tls_cert):
        _bad("admin_tls_* files without admin=HOST:PORT: add the admin API's address")
    return Settings(
        addr=_join_host_port(host, port),
        lease=_seconds("lease", opt["lease"], MAX_LEASE) if "lease" in opt else DEFAULT_LEASE,
        connect_timeout=_seconds("connect_timeout", opt["connect_timeout"], 3600) if "connect_timeout" in opt else DEFAULT_CONNECT_TIMEOUT,
        tls=tls,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        admin=admin,
        admin_tls_ca=admin_tls_ca,
        admin_tls_cert=admin_tls_cert,
        admin_tls_key=admin_tls_key,
    )


def _tls_context(what: str, ca: Optional[str], cert: Optional[str], key: Optional[str]) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=ca)
        if cert:
            ctx.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as e:
        _bad(f"cannot load the {what} TLS files (ca={ca!r}, cert={cert!r}, key={key!r}): {e}")
    return ctx


def _split(addr: str) -> Tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def _raise_tooz(e: MonolockError) -> NoReturn:
    """A client error as tooz's: a server that cannot be reached or a lost
    connection is a ToozConnectionError, anything else a ToozError."""
    cls = coordination.ToozConnectionError if isinstance(e, (Unavailable, CertificateRefused)) else tooz.ToozError
    utils.raise_with_cause(cls, str(e), cause=e)


class _AdminConnection(http.client.HTTPConnection):
    """HTTP, or HTTPS verifying the certificate against the host the URL
    named (an IP or a DNS name)."""

    def __init__(self, host: str, port: int, timeout: float, ctx: Optional[ssl.SSLContext]) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ctx = ctx

    def connect(self) -> None:
        super().connect()  # every address of host in turn, like socket.create_connection
        if self._ctx is not None:
            self.sock = self._ctx.wrap_socket(self.sock, server_hostname=self.host)


class AdminAPI:
    """The one call of the admin API the driver makes: force-release."""

    def __init__(self, addr: str, ctx: Optional[ssl.SSLContext], timeout: float = ADMIN_TIMEOUT) -> None:
        self.addr = addr
        self._ctx = ctx
        self._timeout = timeout

    def force_release(self, name: str) -> bool:
        """POST /api/locks/{name}/release: True when a holder was released,
        False when the lock was idle (404). Needs the ``release`` role."""
        segment = urllib.parse.quote(name, safe="")
        if segment in (".", ".."):
            segment = segment.replace(".", "%2E")
        path = f"/api/locks/{segment}/release"
        status, body = self._request("POST", path)
        if status == 200:
            return True
        if status == 404 and b"idle" in body:
            # The idle lock's 404; any other (a wrong path, a server without
            # the endpoint) is an error below.
            return False
        detail = body.decode("utf-8", "replace").strip()[:500]
        hint = ""
        if status == 403:
            hint = (": break_() needs the admin role 'release' (grant it to the operator certificate in the server's"
                    " -admin-acl-file, and give that certificate as admin_tls_cert and admin_tls_key)")
        raise tooz.ToozError(f"monolock admin API {self.addr}: POST {path} answered {status} {detail}{hint}")

    def _request(self, method: str, path: str) -> Tuple[int, bytes]:
        host, port = _split(self.addr)
        scheme = "https" if self._ctx is not None else "http"
        conn = _AdminConnection(host, port, self._timeout, self._ctx)
        try:
            try:
                conn.connect()
                # Host is the IP:port connected to: the admin port accepts an
                # IP literal or localhost there, whatever name the URL gave.
                ip = str(conn.sock.getpeername()[0])
                conn.request(method, path, headers={"Host": _join_host_port(ip, port)})
                resp = conn.getresponse()
                return resp.status, resp.read(ADMIN_MAX_BODY)
            finally:
                conn.close()
        except (OSError, http.client.HTTPException) as e:
            utils.raise_with_cause(
                coordination.ToozConnectionError,
                f"monolock admin API {scheme}://{self.addr}: {method} {path} failed: {e!r}"
                " (check admin=HOST:PORT against the server's -admin-listen, and admin_tls_* when it speaks HTTPS)",
                cause=e,
            )


class MonolockLock(locking.Lock):
    """An exclusive monolock lock under a tooz name. Each successful acquire
    is one claim (one connection) until release; the object may be shared by
    threads, and a blocking acquire while another thread holds it queues
    behind that thread. Like threading.Lock, it is not re-entrant: a thread
    that holds it and calls acquire() with blocking=True and no timeout waits
    forever."""

    def __init__(self, name: bytes, driver: "MonolockDriver") -> None:
        super().__init__(name)
        self.server_name = lock_name(name)
        self._driver = driver
        self._mu = threading.Lock()
        self._held: Optional[ClientLock] = None

    def acquire(self, blocking: Union[bool, float] = True, shared: bool = False, timeout: Optional[float] = None) -> bool:
        """Queues for the lock in FIFO order. blocking=True waits as long as it
        takes (or ``timeout`` seconds), False returns False at once when
        someone holds it, a number waits at most that many seconds. Shared
        locks raise tooz.NotImplemented."""
        if shared:
            raise tooz.NotImplemented("monolock locks are exclusive: acquire(shared=True) is not supported")
        block, limit = utils.convert_blocking(blocking, timeout)
        wait: Union[bool, float] = (True if limit is None else limit) if block else False
        try:
            claim = self._driver.client().acquire(self.server_name, lease=self._driver.settings.lease, wait=wait)
        except Busy:
            return False
        except MonolockError as e:
            _raise_tooz(e)
        with self._mu:
            # Granted, so any earlier claim of this object has ended; a lost one may still keep its connection.
            stale, self._held = self._held, claim
        if stale is not None:
            stale.release()
        self._driver.holding(self, True)
        return True

    def release(self) -> bool:
        """Releases the lock: True when it was held until now, False when it
        was not held or was lost (expired, broken, connection lost)."""
        with self._mu:
            claim, self._held = self._held, None
        if claim is None:
            return False
        self._driver.holding(self, False)
        # release() has read what had arrived, so a break or a loss the
        # server announced shows in error.
        claim.release()
        return claim.error is None

    def is_still_owner(self) -> bool:
        """True while this object holds the lock and the server confirmed it
        within the last 0.8 x lease (the client's valid(): no I/O)."""
        with self._mu:
            claim = self._held
        return claim is not None and claim.valid()

    def break_(self) -> bool:
        """Force-releases the lock whoever holds it, through the admin API
        (role ``release``): True when a holder was released, False when the
        lock was idle. The first waiter is granted next."""
        api = self._driver.admin_api()
        if api is None:
            raise tooz.NotImplemented("monolock: break_() needs the admin API: add admin=HOST:PORT to the tooz URL")
        return api.force_release(self.server_name)

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the current hold, None when not held. Pass it
        with every write the work makes (docs/fencing.md)."""
        with self._mu:
            claim = self._held
        return None if claim is None else claim.token


def _not_implemented(what: str) -> NoReturn:
    raise tooz.NotImplemented(f"monolock: {what} is not implemented: the monolock tooz driver offers locks only")


class MonolockDriver(coordination.CoordinationDriver):
    """tooz's coordinator for ``monolock://`` URLs: locks only."""

    CHARACTERISTICS = (
        coordination.Characteristics.DISTRIBUTED_ACROSS_THREADS,
        coordination.Characteristics.DISTRIBUTED_ACROSS_PROCESSES,
        coordination.Characteristics.DISTRIBUTED_ACROSS_HOSTS,
        # One server orders every grant of a lock.
        coordination.Characteristics.LINEARIZABLE,
    )

    def __init__(self, member_id: bytes, parsed_url: Any, options: Dict[str, Any]) -> None:
        super().__init__(member_id, parsed_url, options)
        self.settings = parse_settings(parsed_url.hostname, parsed_url.port, options)
        s = self.settings
        self._ssl = _tls_context("lock port", s.tls_ca, s.tls_cert, s.tls_key) if s.tls else None
        admin_ssl = _tls_context("admin", s.admin_tls_ca, s.admin_tls_cert, s.admin_tls_key) if s.admin_https else None
        self._admin = AdminAPI(s.admin, admin_ssl) if s.admin else None
        self._client = Client(s.addr, ssl_context=self._ssl, connect_timeout=s.connect_timeout)
        self._mu = threading.Lock()
        self._holding: Set[MonolockLock] = set()

    def client(self) -> Client:
        if not self.is_started:
            raise tooz.ToozError("monolock: the coordinator is not started: call start() before acquiring a lock")
        return self._client

    def admin_api(self) -> Optional[AdminAPI]:
        return self._admin

    def holding(self, lock: MonolockLock, held: bool) -> None:
        with self._mu:
            if held:
                self._holding.add(lock)
            else:
                self._holding.discard(lock)

    def _start(self) -> None:
        """Checks that the lock port takes connections (and, with TLS, a
        handshake), so a wrong address fails here rather than at the first
        lock. The probe connection sends nothing and is closed at once."""
        host, port = _split(self.settings.addr)
        try:
            sock = socket.create_connection((host, port), timeout=self.settings.connect_timeout)
            try:
                if self._ssl is not None:
                    self._ssl.wrap_socket(sock, server_hostname=host).close()
            finally:
                sock.close()
        except OSError as e:
            utils.raise_with_cause(
                coordination.ToozConnectionError,
                f"monolock: cannot connect to {self.settings.addr}: {e} (check the tooz URL's HOST:PORT and tls_* options)",
                cause=e,
            )

    def _stop(self) -> None:
        """Releases every lock still held through this coordinator."""
        with self._mu:
            held = list(self._holding)
        for lock in held:
            lock.release()

    def get_lock(self, name: bytes) -> MonolockLock:
        return MonolockLock(name, self)

    # Groups, membership and elections are not offered; the watch methods
    # would otherwise keep callbacks that never run.
    def watch_join_group(self, group_id: bytes, callback: Callable[..., Any]) -> NoReturn:
        _not_implemented("watch_join_group")

    def unwatch_join_group(self, group_id: bytes, callback: Callable[..., Any]) -> NoReturn:
        _not_implemented("unwatch_join_group")

    def watch_leave_group(self, group_id: bytes, callback: Callable[..., Any]) -> NoReturn:
        _not_implemented("watch_leave_group")

    def unwatch_leave_group(self, group_id: bytes, callback: Callable[..., Any]) -> NoReturn:
        _not_implemented("unwatch_leave_group")

    def watch_elected_as_leader(self, group_id: bytes, callback: Callable[..., Any]) -> NoReturn:
        _not_implemented("watch_elected_as_leader")

    def unwatch_elected_as_leader(self, group_id: bytes, callback: Callable[..., Any]) -> NoReturn:
        _not_implemented("unwatch_elected_as_leader")
