"""docs/results/fatbin_archs.py reads which architectures a library carries SASS and PTX for from
its fatbin headers (issue 38: what the driver JIT-compiles in a machine's first process)."""
from __future__ import annotations

import importlib.util
import struct

from conftest import ROOT


def _load():
    spec = importlib.util.spec_from_file_location("fatbin_archs", ROOT / "docs" / "results" / "fatbin_archs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _entry(kind: int, arch: int, payload: bytes) -> bytes:
    """A fatbin entry: a 64-byte header (kind, header size, payload size; the arch at byte 28), then
    the payload."""
    head = struct.pack("<HHIQ", kind, 0, 64, len(payload)).ljust(28, b"\0") + struct.pack("<I", arch)
    return head.ljust(64, b"\0") + payload


def _fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_every_entry_of_every_fatbin_is_counted_by_kind_and_arch(tmp_path):
    fb = _load()
    a = _fatbin(_entry(2, 75, b"x" * 40), _entry(2, 90, b"y" * 13), _entry(1, 120, b"ptx"))
    b = _fatbin(_entry(1, 90, b"p" * 7))
    lib = tmp_path / "libtwo.so"
    lib.write_bytes(b"\x7fELF" + b"\0" * 100 + a + b"\0" * 9 + b)
    got = fb.entries(lib.read_bytes())
    assert got == {("SASS", 75): 1, ("SASS", 90): 1, ("PTX", 120): 1, ("PTX", 90): 1}
    assert fb.entries(b"no device code here") == {}
    # a truncated fatbin ends the scan, it does not raise
    assert fb.entries(a[:40]) == {}


def test_the_table_says_which_libraries_the_gpu_needs_the_jit_for(tmp_path, capsys):
    fb = _load()
    elf = b"\x7fELF" + b"\0" * 12
    (tmp_path / "libsass.so").write_bytes(elf + _fatbin(_entry(2, 90, b"s"), _entry(1, 120, b"p")))
    (tmp_path / "libptx.so.1").write_bytes(elf + _fatbin(_entry(1, 90, b"p")))
    (tmp_path / "libnone.so").write_bytes(elf + b"host code only")
    (tmp_path / "notes.txt").write_bytes(_fatbin(_entry(1, 90, b"p")))  # not an ELF file: not read
    fb.main(["--arch", "90", str(tmp_path)])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split(" | ")[1:] for r in rows] == [["-", "90", "yes |"], ["90", "120", "no |"]]
    assert all("libnone" not in r and "notes" not in r for r in rows)
