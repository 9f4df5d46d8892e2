"""monolock.fence's statements against fence/testdata/sql.txt, the fencing
SQL every monolock client sends, byte for byte (the file's header says the
format and the placeholder rule)."""

from __future__ import annotations

import pathlib
import unittest
from typing import Dict, List, Optional

from monolock import fence

VECTORS = pathlib.Path(__file__).resolve().parents[3] / "fence" / "testdata" / "sql.txt"


def read_vectors() -> Dict[str, str]:
    """The sections of the vectors file by "DIALECT NAME"."""
    vectors: Dict[str, str] = {}
    name: Optional[str] = None
    body: List[str] = []
    for line in VECTORS.read_text(encoding="utf-8").split("\n"):
        if line.startswith("-- ") and line.endswith(" --"):
            if name is not None:
                vectors[name] = "\n".join(body).removesuffix("\n")
            name, body = line[3:-3], []
        elif name is not None:
            body.append(line)
    if name is not None:
        vectors[name] = "\n".join(body).removesuffix("\n")
    return vectors


class VectorsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.vectors = read_vectors()

    def test_schema(self) -> None:
        for d in (fence.POSTGRESQL, fence.MYSQL):
            with self.subTest(dialect=d):
                self.assertEqual(fence.schema(d), self.vectors[f"{d} schema"])

    def test_admit(self) -> None:
        # qmark: PostgreSQL's $1 and $2 become ? and ?, MySQL's ? stay.
        pg = self.vectors["postgresql admit"].replace("$1", "?").replace("$2", "?")
        self.assertEqual(fence.admit_statement(fence.POSTGRESQL, "qmark"), pg)
        self.assertEqual(fence.admit_statement(fence.MYSQL, "qmark"), self.vectors["mysql admit"])
        # format, the default: %s for each.
        self.assertEqual(fence.admit_statement(fence.MYSQL), self.vectors["mysql admit"].replace("?", "%s"))


if __name__ == "__main__":
    unittest.main()
