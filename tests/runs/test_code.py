"""The code a run records: version, commit and whether the package's files differ from it."""

import subprocess

from synthesizer import __version__
from synthesizer.runs import code


def test_the_code_is_the_checkout_this_package_runs_from():
    found = code.code_provenance()
    assert found["version"] == __version__
    if not (code.CHECKOUT / ".git").exists():  # an installed copy: no commit to name
        assert found["commit"] is None and found["modified"] is None
        return
    head = subprocess.run(["git", "-C", str(code.CHECKOUT), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert found["commit"] == head.stdout.strip() and isinstance(found["modified"], bool)
