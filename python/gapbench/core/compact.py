"""`gapbench compact`: store result files compactly, and say what a result file is.

    gapbench compact RESULT.json [...]            # writes RESULT.json.gz beside each
    gapbench compact RESULT.json --out-dir DIR    # writes DIR/RESULT.json.gz
    gapbench compact --describe FILE [...]        # date, device, command of each file; writes nothing

A compact file is the same run document as gzip-compressed minified JSON, without the derived
summaries (they are recomputed from the raw samples on load, see result.Record), so every raw
sample is kept exactly. `load_run`, `bench.report` and `gapbench csv` read both forms. The
compact file is checked before the command reports success: it must load to the same records,
sample for sample, as the original. `--remove` then deletes the original.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from gapbench.core.cli import ArgumentParser
from gapbench.core.result import SchemaError, is_compact_path, load_run, read_document, write_document


@dataclass
class Description:
    """What a file says about itself: when, on what, by which command (empty where it does not say)."""

    kind: str  # "gapbench run", "text", or "other"
    date: str = ""
    device: str = ""
    command: str = ""


def compact_path(src: Path, out_dir: Path | None = None) -> Path:
    name = src.name
    for ext in (".json.gz", ".json"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    return (out_dir or src.parent) / f"{name}.json.gz"


def compact_file(src: str | Path, dst: str | Path | None = None, *, keep_derived: bool = False) -> Path:
    """Write `src` (a gapbench run file) as a compact `.json.gz` and check that it loads to the
    same records. Returns the compact file's path. Raises SchemaError for a file that is not a run."""
    src = Path(src)
    dst = Path(dst) if dst is not None else compact_path(src)
    if not is_compact_path(dst):
        raise SchemaError(f"{dst}: a compact result file's name must end in .json.gz")
    in_place = dst.resolve() == src.resolve()  # a .json.gz as written by a run: rewritten compact
    original = src.read_bytes() if in_place else None
    doc = read_document(src)
    before = load_run(src)
    if not keep_derived:
        doc["records"] = [{k: v for k, v in r.items() if k != "derived"} if isinstance(r, dict) else r
                          for r in doc.get("records", [])]
    write_document(dst, doc)
    after = load_run(dst)
    if [r.to_dict() for r in before.records] != [r.to_dict() for r in after.records] \
            or before.run != after.run or before.env != after.env:
        if in_place:
            dst.write_bytes(original)
        else:
            dst.unlink()
        raise SchemaError(f"{src}: the compact copy did not load to the same records; nothing written")
    return dst


def _device_of(doc: dict) -> str:
    names: list[str] = []
    for r in doc.get("records", []):
        dev = r.get("device") if isinstance(r, dict) else None
        name = dev.get("name") if isinstance(dev, dict) else None
        if name and name not in names:
            names.append(str(name))
    if not names:
        cpu = doc.get("env", {}).get("cpu")
        if cpu:
            names.append(f"CPU: {cpu}")
    return ", ".join(names)


def describe(path: str | Path) -> Description:
    """Date, device and command of a result file: from the run document for gapbench run files
    (plain or compact), from the leading `#` comment lines for text files (the sweep tools write
    their command, device and date there); other files describe nothing."""
    path = Path(path)
    try:
        doc = read_document(path)
    except SchemaError:
        doc = None
    if doc is not None:
        run = doc.get("run", {})
        date = str(run.get("started", ""))
        if run.get("finished"):
            date += f" to {run['finished']}"
        return Description("gapbench run", date, _device_of(doc), str(run.get("command", "")))
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return Description("other")
    head = [ln[1:].strip() for ln in text.splitlines()[:6] if ln.startswith("#")]
    return Description("text", command=" / ".join(head)[:400])


def main(argv: list[str] | None = None, prog: str = "gapbench compact") -> int:
    ap = ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="gapbench result JSON files")
    ap.add_argument("--out-dir", help="write the compact files here (default: beside each original)")
    ap.add_argument("--remove", action="store_true", help="delete each original once its compact copy is checked")
    ap.add_argument("--keep-derived", action="store_true", help="keep the derived summaries in the compact file")
    ap.add_argument("--describe", action="store_true", help="only print each file's date, device and command")
    args = ap.parse_args(argv)
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        print(f"error: no such file: {missing[0]} (give gapbench result files)", file=sys.stderr)
        return 2
    if args.describe:
        for f in args.files:
            d = describe(f)
            print(f"{f}\t{d.kind}\t{d.date}\t{d.device}\t{d.command}")
        return 0
    out_dir = Path(args.out_dir) if args.out_dir else None
    failed = 0
    for f in args.files:
        src = Path(f)
        try:
            dst = compact_file(src, compact_path(src, out_dir), keep_derived=args.keep_derived)
        except SchemaError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"{src} -> {dst} ({src.stat().st_size / 1e3:.0f} kB -> {dst.stat().st_size / 1e3:.0f} kB)")
        if args.remove:
            src.unlink()
    if failed == len(args.files):
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
