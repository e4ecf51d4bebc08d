"""The kernel lab from Python: find the lab binaries (cuda/lab, built with GAPBENCH_LAB=ON), run
one in a subprocess with a timeout, and read its JSON into result records.

Each lab binary (gapbench_lab_<op>) verifies every numbered variant of one op against a float64
CPU reference, then times the variants against the vendor library in interleaved rounds. Its
--json file is {"schema": "gapbench.lab", "schema_version": 1, "op", "device", "vendor",
"cublas", "cold", "rounds", "warmup", "seed", "records": [...]} with one record per arm:
{op, dtype, shape ("MxK"), variant (0 vendor, N variant N, -1 an experiment), name, config,
status (ok | n/a | failed | error), reason, verified, rel_err, median_s, ratio_vs_vendor (median
over rounds of vendor time / variant time), ci_lo, ci_hi (its distribution-free 95% interval),
ci_coverage, bytes, flops, samples_s} (cuda/lab/README.md).

This backs `python -m bench.blas --variants all`: the lab's rows are probe "blas", backend
"native-cuda", variant "lab-v<N>" (a tuning configuration "lab-v<N>:<name>", the vendor arm
"lab-<cublas|memcpy>", so they never collide with the library's rows).
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gapbench.core import process
from gapbench.core.names import Backend, ColdScrub
from gapbench.core.result import ERROR, FAILED, NOT_APPLICABLE, OK, Record

#: the ops with a lab file of their own (cuda/lab/<op>.cu: a sweep of variants that never shipped).
#: copy's and gemv's variants all ship, and vjp_dw's unshipped one is a lab kernel of the extension
#: (csrc/lab.def): bench.blas --variants all times all of them by name.
OPS = ("vjp_dx", "gemm")
SCHEMA, SCHEMA_VERSION = "gapbench.lab", 1
#: the lab's --cold mode -> the metric and `cache` text bench.blas uses for the same timing
COLD = {
    ColdScrub.read.value: ("time_cold", "cold (L2 flushed clean: 2x-L2 read pass before each run)"),
    ColdScrub.write.value: ("time_cold_dirty", "cold (L2 scrubbed dirty: 2x-L2 memset before each run)"),
    "none": ("time", "hot (no scrub; one input set, so L2 keeps what the previous run left)"),
}
_STATUS = {"ok": OK, "n/a": NOT_APPLICABLE, "failed": FAILED, "error": ERROR}
_DIMS = {"copy": ("n",), "gemv": ("m", "k"), "vjp_dx": ("m", "k"), "vjp_dw": ("m", "k"),
         "gemm": ("batch", "m", "n", "k")}
BUILD_HINT = ("build it with: pip install . -Ccmake.define.GAPBENCH_LAB=ON  (or cmake -S . -B build-lab "
              "-DGAPBENCH_LAB=ON && cmake --build build-lab, then set GAPBENCH_LAB_DIR=build-lab)")


class LabError(RuntimeError):
    """A lab run that did not produce results: `kind` is one of not_built, usage, no_device,
    timeout, crash, bad_output."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass
class LabRun:
    """One finished lab run: its records, the raw JSON document, the exit status (1 when a variant
    failed verification: its rows say so) and the binary's stdout (the table)."""

    records: list[Record]
    document: dict
    returncode: int
    stdout: str


def find_binary(op: str) -> Path:
    """The lab binary for `op`: in $GAPBENCH_LAB_DIR (gapbench_lab_<op> or <op>, as the nvcc
    one-liners name it), else installed in gapbench/bin. Raises LabError(kind="not_built")."""
    if op not in OPS:
        raise ValueError(f"unknown lab op {op!r}: want one of {', '.join(OPS)}")
    places: list[Path] = []
    if os.environ.get("GAPBENCH_LAB_DIR"):
        d = Path(os.environ["GAPBENCH_LAB_DIR"])
        places += [d / f"gapbench_lab_{op}", d / op]
    from importlib import resources

    places.append(Path(str(resources.files("gapbench").joinpath("bin", f"gapbench_lab_{op}"))))
    for p in places:
        if p.is_file() and os.access(p, os.X_OK):
            return p
    raise LabError("not_built", f"the kernel lab is not built (no gapbench_lab_{op} in "
                                f"{', '.join(str(p.parent) for p in places)}); {BUILD_HINT}")


def cublas_path() -> str | None:
    """A libcublas to hand the lab (--cublas): the nvidia-cublas wheel's, then CUDA_HOME's."""
    found: list[str] = []
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found += sorted(glob.glob(os.path.join(root, "*", "lib", "libcublas.so*")), reverse=True)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            found += sorted(glob.glob(os.path.join(home, "lib64", "libcublas.so*")), reverse=True)
    versioned = [p for p in found if not p.endswith(".so")]
    return (versioned or found or [None])[0]


def _shape(op: str, text: str) -> dict:
    parts = [int(x) for x in text.split("x")]
    names = _DIMS[op]
    if len(parts) != len(names):
        raise LabError("bad_output", f"shape {text!r} does not fit {op} ({'x'.join(names)})")
    return dict(zip(names, parts))


def parse(text: str) -> list[Record]:
    """Records from a lab JSON document (the schema in this module's docstring)."""
    return records_from(_load(text))


def _load(text: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LabError("bad_output", f"lab output is not JSON: {e}") from e


def records_from(doc: dict) -> list[Record]:
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise LabError("bad_output", f"not a {SCHEMA} document")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise LabError("bad_output", f"{SCHEMA} schema version {doc.get('schema_version')!r}: "
                                     f"this gapbench reads {SCHEMA_VERSION}")
    cold = doc.get("cold", ColdScrub.read.value)
    if cold not in COLD:
        raise LabError("bad_output", f"unknown cold mode {cold!r}")
    metric, cache = COLD[cold]
    device = dict(doc.get("device") or {}, cublas=doc.get("cublas"), cublas_version=doc.get("cublas_version"))
    out = []
    for r in doc.get("records", []):
        op = r["op"]
        vid, name, config = int(r["variant"]), r["name"], r.get("config") or ""
        if vid == 0:
            variant = f"lab-{name}"
        elif config:
            variant = f"lab-v{vid}:{name}" if vid > 0 else f"lab-{name}"
        else:
            variant = f"lab-v{vid}"
        status = _STATUS.get(r.get("status"), ERROR)
        reason = r.get("reason", "")
        samples = [float(x) for x in r.get("samples_s") or []]
        if status == OK and not samples:
            status, reason = ERROR, "no valid samples (every timed run's gate timed out)"
        if status != OK:
            samples = []
        shape = _shape(op, r["shape"])
        err = r.get("rel_err")
        out.append(Record(
            probe="blas", backend=Backend.native_cuda, metric=metric, variant=variant, status=status, reason=reason,
            op=f"{op} {name}" + (f" ({config} configuration)" if config else ""),
            clock="device_events" if samples else None, samples_s=samples, warmup=int(doc.get("warmup", 0)),
            params={"op": op, "dtype": r["dtype"], "shape": shape, "shape_text": r["shape"], "cache": cache,
                    "source": "lab", "lab": {"id": vid, "name": name, "config": config,
                                             "ratio_vs_vendor": r.get("ratio_vs_vendor"),
                                             "ci_lo": r.get("ci_lo"), "ci_hi": r.get("ci_hi"),
                                             "ci_coverage": r.get("ci_coverage"), "rounds": doc.get("rounds"),
                                             "seed": doc.get("seed")}},
            work={k: float(r[k]) for k in ("bytes", "flops") if r.get(k)},
            verified=bool(r.get("verified")) if status in (OK, FAILED) else None,
            verify_detail=("" if err is None else
                           f"norm-wise rel. error {err:.3e} vs a float64 CPU reference (poisoned output; "
                           "the last timed run checked too)"),
            device=device))
    return out


def run(op: str, args: Sequence[str] = (), *, timeout_s: float = 1800.0, binary: Path | None = None) -> LabRun:
    """Run the lab binary for `op` with `args` (its own flags, e.g. ["--variants", "all",
    "--dtypes", "fp16"]) and return its records. The child runs in its own process group, killed
    whole on timeout. Raises LabError: not_built, usage (exit 2), no_device (exit 3), timeout,
    crash (no JSON), bad_output."""
    exe = binary or find_binary(op)
    cmd = [str(exe), *args]
    if "--cublas" not in args:
        lib = cublas_path()
        if lib:
            cmd += ["--cublas", lib]
    with tempfile.TemporaryDirectory(prefix="gapbench-lab-") as tmp:
        out = Path(tmp) / "lab.json"
        cmd += ["--json", str(out)]
        try:
            proc = process.run(cmd, timeout_s, name=exe.name)
        except process.ChildTimeout:
            raise LabError("timeout", f"{exe.name} ran past {timeout_s:g} s and was killed") from None
        stdout, stderr = proc.stdout, proc.stderr
        last = (stderr.strip().splitlines() or [""])[-1]
        if proc.returncode == 2:
            raise LabError("usage", f"{exe.name}: {last}")
        if proc.returncode == 3:
            raise LabError("no_device", f"{exe.name}: {last}")
        if not out.is_file():
            raise LabError("crash", f"{exe.name} exited with status {proc.returncode} and wrote no results: {last}")
        text = out.read_text()
    doc = _load(text)
    return LabRun(records=records_from(doc), document=doc, returncode=proc.returncode, stdout=stdout)
