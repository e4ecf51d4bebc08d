"""docs/results/ratio_table.py, the generator of the committed ratio tables: it prints each ratio as
the file holds it (vendor time / row time, never inverted), marks a ratio that stopped short of its
target, refuses one between unequal conditions, and names the commit of the code by its content."""
import importlib.util
import sys

import pytest

from conftest import ROOT
from gapbench import ops
from gapbench.benchmarks.blas.params import BlasParams, Paired
from gapbench.benchmarks.blas.run import record
from gapbench.core.names import Backend, DType
from gapbench.core.result import OK, RunWriter


def _module():
    spec = importlib.util.spec_from_file_location("ratio_table", ROOT / "docs" / "results" / "ratio_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(backend, variant, paired):
    shape = {"m": 1024, "k": 16384}
    return record(ops.get("gemv"), DType.fp16, shape, backend, variant, BlasParams(paired=paired), status=OK,
                  samples_s=[1e-5] * 10)


@pytest.fixture
def table(tmp_path):
    def make(paired_torch, paired_cupy=None):
        w = RunWriter(tmp_path / "blas.json", env={"source_hash": "0" * 64}, run={"probe": "blas"}, overhead=None)
        w.add(_row(Backend.native_cuda, "cublas", None))
        w.add(_row(Backend.torch_cuda, "torch", paired_torch))
        if paired_cupy is not None:
            w.add(_row(Backend.cupy, "cupy", paired_cupy))
        w.finish()
        return _module().table(str(tmp_path / "blas.json"))
    return make


def test_a_ratio_is_printed_as_the_file_holds_it(table):
    out = table(Paired(vs="native-cuda/cublas", speed_ratio=1.25, lo=1.2, hi=1.3, verdict="faster", converged=True))
    row = next(line for line in out.splitlines() if line.startswith("| gemv"))
    assert "1.250 [1.200-1.300] **faster**" in row
    assert "0.800" not in row  # not its inverse


def test_an_unconverged_ratio_is_marked_and_unequal_conditions_are_refused(table):
    out = table(Paired(vs="native-cuda/cublas", speed_ratio=1.01, lo=0.99, hi=1.04, verdict="level", converged=False),
                Paired(vs="native-cuda/cublas", not_comparable="cache: l2-resident vs rotated"))
    row = next(line for line in out.splitlines() if line.startswith("| gemv"))
    assert "1.010 [0.990-1.040]* level" in row
    assert "n/c (cache: l2-resident vs rotated)" in row


def test_the_code_commit_is_found_by_content_hash(tmp_path):
    sys.path.insert(0, str(ROOT / "cmake"))
    import provenance

    head = provenance.git_commit(ROOT)
    if head is None:
        pytest.skip("not a git checkout")
    digest = provenance.commit_hash(ROOT, head)
    assert _module().commit_of({"source_hash": digest}).startswith(f"source commit {head[:7]} (found by")
    assert "no commit of this repository" in _module().commit_of({"source_hash": "f" * 64, "source_commit": "abc"})
