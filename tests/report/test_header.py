"""The report's header: the code and the data behind the numbers; the results index's own errors."""

import copy
import re

import pytest

from synthesizer.report.document import provenance_items
from synthesizer.runs.results import Results

from tests.runs.test_results import record


def test_the_header_names_the_code_and_the_data_of_every_task():
    results = Results.empty()
    results.put_run(record(0, code={"version": "0.3.0", "commit": "0123456789ab", "modified": False}))
    results.put_run(record(1))
    results.set_rendered_by({"version": "0.3.0", "commit": "fedcba987654", "modified": True})
    items = provenance_items(Results(results.to_dict()))
    assert items[0] == ("trained by: synthesizer 0.3.0 at 0123456 (1 runs); code not recorded (runs record it from "
                        "0.3.0.dev0 on) (1 runs)")
    assert items[1] == "rendered by: 0.3.0 at fedcba9 (modified)"
    assert items[2] == ("data `lm-sotu`: /data/lm/sotu (shared data folder); train 213 examples sha256 aaa, test 10 "
                        "examples sha256 bbb; tokenizer sha256 ttt")


def test_a_results_index_that_is_not_utf8_is_named(tmp_path):
    from synthesizer.report.index import write_index

    (tmp_path / "README.md").write_bytes(b"# Results \xff\n")
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'README.md'}: not UTF-8 text")):
        write_index(tmp_path)
