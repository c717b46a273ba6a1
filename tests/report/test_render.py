"""Report rendering (markdown, self-contained HTML) and the attention maps behind the heatmaps."""

import base64

import pytest
import torch

from synthesizer.models.classifier import Classifier
from synthesizer.models.config import ModelConfig
from synthesizer.models.lm import LanguageModel
from synthesizer.comparison.attention_maps import attention_maps
from synthesizer.report.render import to_html, to_markdown, write_report

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def test_markdown_and_html_render_the_same_blocks(tmp_path):
    (tmp_path / "a.png").write_bytes(PNG)
    blocks = [("h1", "Title"), ("p", "some **bold** and `code` <tag>"), ("list", ["one", "two"]),
              ("table", ["kind", "value"], [["random+vanilla", "1 | 2"]]), ("img", "a.png", "caption"),
              ("code", "x < y")]
    md = to_markdown(blocks)
    assert md.startswith("# Title\n\nsome **bold**")
    assert "| kind | value |\n|---|---|\n| random+vanilla | 1 \\| 2 |" in md
    assert "![caption](a.png)" in md and "- one\n- two" in md
    page = to_html(blocks, tmp_path, "T")
    assert "<b>bold</b>" in page and "<code>code</code>" in page and "&lt;tag&gt;" in page
    assert f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in page
    assert "<pre>x &lt; y</pre>" in page
    md_path, html_path = write_report(blocks, tmp_path, "T")
    assert md_path.read_text() == md and html_path.exists()
    with pytest.raises(ValueError, match="unknown report block 'video'"):
        to_markdown([("video", "x")])


def _lm(kind):
    torch.manual_seed(0)
    return LanguageModel(ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=2, max_len=12, attention=kind)).eval()


def test_random_maps_are_the_softmax_of_r_with_the_causal_mask():
    model = _lm("random")
    maps = attention_maps(model, list(range(3, 30)), n=8)
    assert len(maps) == 2 and maps[0]["layer"] == "blocks.0.attn" and maps[0]["source"].startswith("softmax(R)")
    heads = torch.tensor(maps[0]["heads"])
    assert heads.shape == (2, 8, 8)  # cut to n (and below max_len=12)
    r = model.blocks[0].attn.logit_modules["random"].r[:, :8, :8]
    expected = torch.softmax(r.masked_fill(torch.ones(8, 8).triu(1).bool(), float("-inf")), dim=-1)
    assert torch.allclose(heads, expected, atol=1e-3)
    assert maps == attention_maps(model, list(range(30, 50)), n=8)  # the same for every input


def test_input_dependent_maps_use_the_sample_input():
    model = _lm("dense+vanilla")
    a = attention_maps(model, list(range(3, 13)), n=6)
    b = attention_maps(model, list(range(20, 30)), n=6)
    assert a[0]["source"] == "sample input" and a[0]["kind"] == "dense+vanilla"
    assert a[1]["heads"] != b[1]["heads"]
    rows = torch.tensor(a[1]["heads"]).sum(-1)
    assert torch.allclose(rows, torch.ones_like(rows), atol=5e-3)
    linformer = Classifier(ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=1, max_len=8, attention="linformer"))
    assert attention_maps(linformer, [3, 4, 5]) == []  # no Synthesizer layer: no maps


def test_the_results_index_judges_the_presets_not_the_diagnostics_or_the_hybrid_study(tmp_path):
    from synthesizer.report.index import judged_folders
    from synthesizer.runs.results import Results

    for name, size in (("lm", "standard"), ("diagnostics", "standard"), ("hybrid", "standard"), ("lm-quick", "quick")):
        results = Results.empty()
        results.set_size(size)
        results.save(tmp_path / name)
    assert [f.name for f in judged_folders(tmp_path)] == ["lm"]
