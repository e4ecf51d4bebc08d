""".ci/gpu, the lent GPU machine's stages: checked here without a GPU. Its header lists each stage
once, each has exactly one case (a second case of one name is unreachable: the API example's stage
was, until daab750), and `timed` reports a command's wall time and exit status on the script's own
output even when the caller sends the command's output to a file that the stage removes later."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = (ROOT / ".ci" / "gpu").read_text()


def test_the_script_parses():
    p = subprocess.run(["bash", "-n", str(ROOT / ".ci" / "gpu")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_every_stage_in_the_header_has_one_case_and_every_case_is_in_the_header():
    header = re.findall(r"^#   bash \.ci/gpu (\w+)", SCRIPT, re.M)
    cases = re.findall(r"^  (\w+)\)$", SCRIPT, re.M)
    assert len(cases) > 20 and len(set(cases)) == len(cases), sorted(c for c in cases if cases.count(c) > 1)
    assert set(header) == set(cases), (set(header) ^ set(cases))


def _helpers() -> str:
    """The script's fd 3 and its timed() function, as the script defines them."""
    start = SCRIPT.index("exec 3>&1")
    end = SCRIPT.index("\n}\n", SCRIPT.index("timed() {")) + 3
    return SCRIPT[start:end]


def test_timed_reports_on_the_scripts_output_through_a_callers_redirect(tmp_path):
    log = tmp_path / "cmd.txt"
    script = (f"py=python3\n{_helpers()}\n"
              f"timed 'slow run' bash -c 'echo from-the-command; echo to-stderr >&2; exit 124' > {log} 2>&1\n"
              "echo rc=$?\n"
              "timed 'fine run' true\n")
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    lines = p.stdout.splitlines()
    assert re.fullmatch(r"slow run wall \d+\.\d s \(exit 124\)", lines[0]), p.stdout
    assert lines[1] == "rc=124"  # the command's status comes back to the caller
    assert re.fullmatch(r"fine run wall \d+\.\d s \(exit 0\)", lines[2]), p.stdout
    assert log.read_text().split() == ["from-the-command", "to-stderr"]  # the file holds the command's only
