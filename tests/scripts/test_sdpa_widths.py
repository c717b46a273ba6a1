"""scripts/sdpa_widths.py: times every width at every length and prints ratios to the first width."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sdpa_widths.py"


def test_it_times_each_width_and_prints_the_ratios(capsys):
    spec = importlib.util.spec_from_file_location("sdpa_widths", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    medians = module.main(["--seqs", "8", "16", "--widths", "4", "5", "--repeats", "2", "--batch", "1",
                           "--heads", "2", "--threads", "1"])
    assert set(medians) == {8, 16} and all(set(m) == {4, 5} and min(m.values()) > 0 for m in medians.values())
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("seq 8: 4: ") and "(1.00x)" in lines[0] and lines[1].startswith("seq 16: ")
