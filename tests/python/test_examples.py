"""The Python examples run as a user runs them."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_agent_example_quarantines_and_verifies(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples/python/agent.py"), "--state", str(tmp_path), "--max-tokens", "4"],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "screen of the tool result: quarantine by prompt_injection" in run.stdout
    assert "verified against" in run.stdout
    assert (tmp_path / "journal.log").read_text().count('"kind":"deletion"') == 1


def test_readme_example_runs():
    """The five-line example in README.md, extracted and run as written."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```python\nimport fak\n")
    code = readme[start + len("```python\n"):readme.index("```", start + 10)]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
