"""Recompress a wheel with LZMA, every file's bytes unchanged, so that it fits a 64 MiB upload (issue 17).

numba-cuda-mlir 0.6.0's wheels are about 71 MB: two shared libraries (libMLIRPythonCAPI.so, 170 MB,
and libLLVM-7.so, 34 MB) make 68 MB of it, deflated. NVIDIA ships them stripped already (strip
--strip-unneeded takes 0.4 MB off the whole package), so this script changes no file: it writes
the same members, RECORD included, compressed with LZMA instead of deflate (zip method 14, which
Python's zipfile, and so pip, reads), and checks that every member's SHA-256 still matches the
wheel's RECORD. The result is about 50 MB and installs as the original does:

    python scripts/repack_wheel.py numba_cuda_mlir-0.6.0-cp312-...whl -o .whl-mlir/
    python3 -m pip install --no-index --no-deps .whl-mlir/numba_cuda_mlir-0.6.0-cp312-...whl

The repacked file keeps the original's name (a wheel's name is its tags), so it lives in its own
folder. Recompressing a 71 MB wheel takes about two minutes.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import sys
import zipfile
from pathlib import Path


def record_hashes(wheel: zipfile.ZipFile) -> dict[str, str]:
    """{member: 'sha256=...'} from the wheel's RECORD (members without a hash are left out)."""
    (record,) = [n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")]
    rows = csv.reader(io.TextIOWrapper(wheel.open(record), encoding="utf-8"))
    return {row[0]: row[1] for row in rows if len(row) > 1 and row[1]}


def digest(data: bytes) -> str:
    """A RECORD hash field: 'sha256=' and the urlsafe base64 digest without padding."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(src: Path, out_dir: Path) -> Path:
    """Write src's members, unchanged, LZMA-compressed, to out_dir/src.name; check them against RECORD."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / src.name
    if dst.resolve() == src.resolve():
        raise SystemExit("the output folder must not hold the input wheel")
    with zipfile.ZipFile(src) as old:
        hashes = record_hashes(old)
        with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_LZMA) as new:
            for info in old.infolist():
                data = old.read(info)
                if info.filename in hashes and digest(data) != hashes[info.filename]:
                    raise SystemExit(f"{info.filename}: its bytes do not match the wheel's RECORD")
                copy = zipfile.ZipInfo(info.filename, info.date_time)
                copy.external_attr, copy.compress_type = info.external_attr, zipfile.ZIP_LZMA
                new.writestr(copy, data)
    with zipfile.ZipFile(dst) as new:  # read back: every hashed member as RECORD says
        bad = [n for n, h in record_hashes(new).items() if digest(new.read(n)) != h]
    if bad:
        raise SystemExit(f"repacked members differ from RECORD: {bad[:5]}")
    return dst


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("-o", "--out-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    dst = repack(args.wheel, args.out_dir)
    mib = lambda p: p.stat().st_size / 2**20  # noqa: E731
    print(f"{dst}: {mib(dst):.1f} MiB (was {mib(args.wheel):.1f} MiB); every member matches RECORD")
    return 0


if __name__ == "__main__":
    sys.exit(main())
