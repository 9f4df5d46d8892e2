"""monolock: a Python client for the monolock lock server.

One TCP connection is one claim on one named lock; closing it releases the
lock; waiters are granted in FIFO order and every grant carries a fencing
token that only grows. See README.md for examples.
"""

from . import fence
from .client import Client, Lock
from .errors import Busy, CertificateRefused, ClientFault, InvalidInput, LockLost, MonolockError, ProtocolViolation, ServerError, Unavailable

__all__ = [
    "Client",
    "Lock",
    "MonolockError",
    "InvalidInput",
    "Busy",
    "Unavailable",
    "ServerError",
    "LockLost",
    "ProtocolViolation",
    "CertificateRefused",
    "ClientFault",
    "fence",
]
__version__ = "0.1.0"
