import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def root() -> Path:
    return ROOT


def run_module(module: str, *args: str, timeout: float = 300, env: dict[str, str] | None = None):
    """Run `python -m module args` from the repository root, as a user would (env: variables set on top
    of this process's)."""
    import os
    import subprocess

    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env} if env else None)


#: the integration tier (issue 38): tests that run gapbench's commands end to end in fresh processes
#: (ranks, bundles, the kernel lab's build, report pages, killed and timed-out children) or refit the
#: committed calibration; seconds to a minute each on 2 cores. `python3 -m pytest -q tests` (CI,
#: the README) runs every tier; `-m 'not integration'` runs the fast one. A module name marks all of
#: its tests, module::name one test (and its parametrisations).
INTEGRATION = (
    "test_lab.py::test_the_lab_kernels_compile_for_hopper", "test_lab.py::test_variants_all_runs_without_the_lab_built",
    "test_dist.py", "test_bundle.py", "test_suite.py", "test_ratio_table.py",
    "test_compare.py::test_the_noise_model_calls_same_finds_a_5pct_slowdown_and_keeps_false_alarms_rare",
    "test_compare.py::test_false_alarms_and_detection_on_synthetic_runs",
    "test_compare.py::test_the_shipped_noise_model_is_what_the_committed_runs_give",
    "test_compare.py::test_the_shipped_floor_section_is_what_the_committed_launch_floor_runs_give",
    "test_compare.py::test_a_between_run_shift_is_absorbed_by_the_margin_and_a_larger_slowdown_is_not",
    "test_compare.py::test_an_injected_slowdown_is_found_and_a_bad_injection_refused",
    "test_blas.py::test_cpu_frameworks_verified_and_timed",
    "test_blas.py::test_cli_runs_one_vjp_cotangent",
    "test_launch.py::test_killed_run_keeps_completed_rows",
    "test_launch.py::test_quick_run_of_every_backend",
    "test_report.py::test_html_page_draws_its_plots_in_headless_chromium",
    "test_usercase.py::test_gapbench_bench_runs_the_torch_example_and_refuses_a_file_without_cases",
    "test_usercase.py::test_compare_reads_a_cases_files_unchanged",
    "test_train.py::test_subprocess_case_and_timeout_rows",
    "test_worker.py::test_paced_command_failures_name_the_loop_and_stop_it",
    "test_worker.py::test_failures_are_typed",
    "test_worker.py::test_sigkill_of_the_parent_takes_the_worker_with_it",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        rel = item.nodeid.split("tests/", 1)[-1]
        name = rel.split("[", 1)[0]
        if any(name == k or name.split("::", 1)[0] == k for k in INTEGRATION):
            item.add_marker(pytest.mark.integration)


def pytest_report_header(config):
    """The sources under test, as the build recorded them: a saved log (e.g. of `pytest -m cuda`
    on a GPU) names the commit and content hash it passed on."""
    try:
        from gapbench.core.env import provenance

        p = provenance()
    except Exception as e:  # the header must never stop the run
        return f"gapbench sources: unknown ({type(e).__name__}: {e})"
    return (f"gapbench sources: commit {p['source_commit']}, hash {p['source_hash']}, dirty {p['dirty']} "
            f"({p['provenance_from']})")


def as_from_a_terminal() -> None:
    """preexec_fn for a child a test will Ctrl-C: SIGINT at its default disposition, as a command
    typed at a terminal has it. A runner started in the background by a shell without job control
    (`nohup bash -c '... &'`) ignores SIGINT, and its children would inherit that, so a Ctrl-C test
    would hang on how the suite was launched rather than on gapbench."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
