"""The README's sample outputs come from the code: a change that makes them stale fails here."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_samples_match_a_fresh_run():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "make_figures.py"),
                           "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "match the code" in done.stdout
