"""Checks that a built wheel of the client carries the licence.

Usage: python3 check_dist.py DIST.whl (make python-dist builds the wheel and
runs this). The wheel must hold the repository's LICENSE, byte for byte, under
.dist-info/licenses/, and its METADATA must name it (License-File) and the
licence (License-Expression: MIT).
"""

import pathlib
import sys
import zipfile


def main(wheel: str) -> int:
    licence = (pathlib.Path(__file__).resolve().parent / "LICENSE").read_bytes()
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        shipped = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        metadata = [n for n in names if n.endswith(".dist-info/METADATA")]
        if not shipped or not metadata:
            print(f"{wheel}: no .dist-info/licenses/LICENSE or no METADATA; it holds {names}")
            return 1
        if z.read(shipped[0]) != licence:
            print(f"{wheel}: {shipped[0]} differs from the repository's LICENSE")
            return 1
        fields = z.read(metadata[0]).decode().splitlines()
    for want in ("License-Expression: MIT", "License-File: LICENSE"):
        if want not in fields:
            print(f"{wheel}: METADATA lacks {want!r}")
            return 1
    print(f"{wheel}: LICENSE shipped, METADATA says License-Expression: MIT and License-File: LICENSE")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
