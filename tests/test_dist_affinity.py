"""Rank binding (gapbench.core.affinity): which CPUs each rank gets, from a topology given here,
and that the binding reaches the child process."""
import os
import sys

import pytest

from gapbench.core import process
from gapbench.core.affinity import gpu_local_cpus, parse_cpu_list, physical_cores, rank_cpus

#: `nvidia-smi topo -m` as the 2 x H200 machine printed it (2026-11-23), ANSI underline included
TOPO_2xH200 = ("\x1b[4m\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
               "GPU0\t X \tNV18\t0-31\t0\t\tN/A\nGPU1\tNV18\t X \t0-31\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n")
#: a two-socket shape: GPU0/1 near CPUs 0-7 and 16-23, GPU2/3 near 8-15 and 24-31
TOPO_4 = ("\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
          "GPU0\t X \tNV4\tSYS\tSYS\t0-7,16-23\t0\nGPU1\tNV4\t X \tSYS\tSYS\t0-7,16-23\t0\n"
          "GPU2\tSYS\tSYS\t X \tNV4\t8-15,24-31\t1\nGPU3\tSYS\tSYS\tNV4\t X \t8-15,24-31\t1\n")


def smt2(cpu: int) -> tuple:
    """32 CPUs, 16 cores with 2 hardware threads each: CPU c and c + 16 share core c % 16."""
    return (0, cpu % 16)


def test_cpu_lists_parse():
    assert parse_cpu_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpu_list("N/A") == set()


def test_gpu_local_cpus_from_topo():
    assert gpu_local_cpus(TOPO_2xH200) == {0: set(range(32)), 1: set(range(32))}
    four = gpu_local_cpus(TOPO_4)
    assert four[0] == set(range(0, 8)) | set(range(16, 24)) and four[3] == set(range(8, 16)) | set(range(24, 32))
    assert gpu_local_cpus(None) == {} and gpu_local_cpus("no table here") == {}


def test_ranks_get_disjoint_physical_cores_one_thread_each():
    assert physical_cores({0, 16, 1, 17}, smt2) == [[0, 16], [1, 17]]
    cpus, how = rank_cpus(2, gpu_local_cpus(TOPO_2xH200), allowed=set(range(32)), core_of=smt2)
    assert cpus == [list(range(0, 8)), list(range(8, 16))]  # 8 cores each, never a core's second thread
    assert "rank 1: CPUs 8-15" in how


def test_ranks_stay_near_their_gpu():
    cpus, _ = rank_cpus(4, gpu_local_cpus(TOPO_4), allowed=set(range(32)), core_of=smt2)
    assert cpus == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]


def test_too_few_cores_leaves_ranks_unbound_and_says_why():
    cpus, how = rank_cpus(3, None, allowed={0, 16, 1, 17}, core_of=smt2)
    assert cpus is None and "3 ranks share 2 physical cores" in how


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity (Linux)")
def test_binding_reaches_the_child():
    cpu = min(os.sched_getaffinity(0))
    code = "import os; print(sorted(os.sched_getaffinity(0)))"
    with process.start([sys.executable, "-c", code], cpus=[cpu], stdout=process.PIPE, text=True) as child:
        out, _ = child.communicate(timeout=60)
    assert out.strip() == f"[{cpu}]"
