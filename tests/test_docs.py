"""The documentation stays small and its links resolve: README.md within 15 KB, every relative
link in README.md and docs/**/*.md pointing at a file or folder of the checkout, and the tracked
docs tree (results included) within its size budget."""
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_LIMIT = 15 * 1024
DOCS_LIMIT = 5_000_000
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _markdown_files():
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def relative_links(text: str) -> list[str]:
    """Targets of inline Markdown links and images that point into the checkout (no scheme, no
    pure #anchor), with any #anchor removed. Code spans are skipped: `a [b](c)` is not a link."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    out = []
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        out.append(unquote(target.split("#", 1)[0]))
    return out


def test_link_finder_finds_links_and_skips_urls_anchors_and_code():
    text = "see [a](docs/x.md#part), ![fig](img/f.png), [web](https://e.org), [top](#top), `[no](code.md)`"
    assert relative_links(text) == ["docs/x.md", "img/f.png"]


def test_readme_is_at_most_15_kb():
    size = (ROOT / "README.md").stat().st_size
    assert size <= README_LIMIT, f"README.md is {size} bytes; move detail to docs/ (limit {README_LIMIT})"


@pytest.mark.parametrize("md", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(md):
    broken = [t for t in relative_links(md.read_text(encoding="utf-8")) if not (md.parent / t).exists()]
    assert not broken, f"{md.relative_to(ROOT)} links to missing files: {broken}"


def test_tracked_docs_tree_is_within_budget():
    try:
        listed = subprocess.run(["git", "ls-files", "docs"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked docs tree cannot be listed")
    files = [ROOT / f for f in listed.stdout.splitlines()]
    if not files:
        pytest.skip("no tracked docs in this checkout")
    total = sum(f.stat().st_size for f in files if f.exists())
    assert total <= DOCS_LIMIT, f"tracked docs/ is {total} bytes (limit {DOCS_LIMIT}); compact or move results to history"
