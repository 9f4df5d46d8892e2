"""Runs tooz's own suite, tooz/tests/test_coordination.py from the installed
tooz wheel, unchanged, against a real monolock server: the judge of the
driver. ``make tooz-test`` runs it as ``python -m tests_tooz.suite`` from
clients/python, in bin/tooz-venv.

It starts the server (MONOLOCK_BIN, or built with go) on 127.0.0.1 port 0
with the admin API on, sets TOOZ_TEST_URL to
``monolock://LISTEN?admin=ADMIN&lease=2``, runs pytest on the module, prints
the counts as ``tooz: N passed, N failed, N skipped`` and stops the server,
also when pytest fails or this process is interrupted or terminated. It
exits non-zero when a test failed or errored, or when none passed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from types import FrameType
from typing import Optional, Tuple

from tests.support import Server

SUITE = "tooz.tests.test_coordination"


def counts(junit_xml: str) -> Tuple[int, int, int]:
    """(passed, failed, skipped) from pytest's JUnit XML; errors count as
    failures."""
    root = ET.parse(junit_xml).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None, f"no testsuite element in {junit_xml}"
    total, failures, errors, skipped = (int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped"))
    return total - failures - errors - skipped, failures + errors, skipped


def terminate(signum: int, frame: Optional[FrameType]) -> None:
    """A SIGTERM handler: exit through SystemExit, so that finally blocks and
    cleanups (the server's stop) run."""
    raise SystemExit(128 + signum)


def main() -> int:
    signal.signal(signal.SIGTERM, terminate)
    # Server takes a TestCase for its cleanup and its skip; this one runs no test.
    owner = unittest.TestCase()
    try:
        server = Server(owner)
        url = f"monolock://{server.addr}?admin={server.admin}&lease=2"
        print(f"tooz: TOOZ_TEST_URL={url}", flush=True)
        with tempfile.TemporaryDirectory(prefix="monolock-tooz-") as tmp:
            junit = os.path.join(tmp, "junit.xml")
            rc = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--pyargs", SUITE, f"--junitxml={junit}"],
                env=dict(os.environ, TOOZ_TEST_URL=url),
            ).returncode
            if not os.path.exists(junit):
                print(f"tooz: pytest exited {rc} without a report", flush=True)
                return rc or 1
            passed, failed, skipped = counts(junit)
    finally:
        owner.doCleanups()
    print(f"tooz: {passed} passed, {failed} failed, {skipped} skipped", flush=True)
    if rc != 0 or failed or not passed:
        return rc or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
