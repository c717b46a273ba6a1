"""torch.compile: the attention layers' fast paths trace without graph breaks and compile (inductor) to
the eager numbers; ``train.compile`` trains, saves plain checkpoint names and resumes.

Inductor compiles take 10-30 s each here: these tests are marked ``compile`` (deselect them with
``-m "not compile"``) and kept to two compiles.
"""

import json

import pytest
import torch
from torch import nn

from synthesizer.attention.factory import build_mixer
from synthesizer.tasks import run_experiment
from synthesizer.training.compiled import check_backend
from tests.tasks.test_experiment import tiny_config, write_data
from tests.tolerances import LAYER, MODEL, assert_close_f32

pytestmark = pytest.mark.compile

KINDS = ["vanilla", "random", "dense", "random+vanilla"]
PATHS = {"vanilla": "fused", "random": "shared", "dense": "fused", "random+vanilla": "fused_bias"}


def _layers(training: bool) -> nn.ModuleList:
    torch.manual_seed(0)
    layers = nn.ModuleList(build_mixer(kind, 16, 2, 16, causal=True) for kind in KINDS).train(training)
    assert [layer.path for layer in layers] == [PATHS[k] for k in KINDS]  # the fast paths, not the reference
    return layers


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(2, 12, 16, generator=torch.Generator().manual_seed(1))
    padding = torch.zeros(2, 12, dtype=torch.bool)
    padding[1, 9:] = True
    return x, padding


@pytest.mark.parametrize("training", [False, True])
def test_attention_fast_paths_trace_without_graph_breaks(training):
    x, padding = _inputs()
    for kind, layer in zip(KINDS, _layers(training)):
        torch._dynamo.reset()
        explained = torch._dynamo.explain(layer)(x.requires_grad_(training), padding)
        assert explained.graph_break_count == 0, (kind, [str(r.reason)[:200] for r in explained.break_reasons])
        assert explained.graph_count == 1, kind


class _All(nn.Module):
    """The four layers on one input: one compile covers them all."""

    def __init__(self, layers: nn.ModuleList):
        super().__init__()
        self.layers = layers

    def forward(self, x, padding):
        return torch.stack([layer(x, padding) for layer in self.layers])


def test_compiled_attention_matches_eager_forward_and_backward():
    torch._dynamo.reset()
    layers = _layers(training=True)
    x, padding = _inputs()
    grad = torch.randn(len(KINDS), *x.shape, generator=torch.Generator().manual_seed(2))

    def run(module):
        xi = x.clone().requires_grad_(True)
        out = module(xi, padding)
        out.backward(grad)
        grads = [xi.grad] + [p.grad.clone() for p in layers.parameters()]
        layers.zero_grad(set_to_none=True)
        return out.detach(), grads

    eager_out, eager_grads = run(_All(layers))
    compiled_out, compiled_grads = run(torch.compile(_All(layers), backend="inductor", fullgraph=True))
    for i, kind in enumerate(KINDS):
        assert_close_f32(compiled_out[i], eager_out[i], f"{kind} output", LAYER)
    for i, (got, want) in enumerate(zip(compiled_grads, eager_grads)):
        assert_close_f32(got, want, f"gradient {i}", MODEL)


def test_compiled_training_saves_plain_names_and_resumes(tmp_path):
    """vanilla: the layers' compiled numbers are checked above; this checks the Trainer's side."""
    torch._dynamo.reset()
    data = write_data(tmp_path / "d", "lm")
    logs = {}
    for name, compiled in (("eager", False), ("compiled", True)):
        cfg = tiny_config("lm", data, "vanilla", train={"compile": compiled, "max_steps": 3, "eval_every": 0})
        run_experiment(cfg, tmp_path / name, progress=False)
        logs[name] = [json.loads(line) for line in (tmp_path / name / "log.jsonl").read_text().splitlines()]
    losses = {name: [r["loss"] for r in log if r["kind"] == "train"] for name, log in logs.items()}
    assert_close_f32(losses["compiled"], losses["eager"], "training losses, compiled against eager", MODEL)

    from safetensors.torch import load_file

    weights = next((tmp_path / "compiled" / "last").glob("*.safetensors"))
    keys = list(load_file(str(weights)))
    assert keys and not any("_orig_mod" in k for k in keys)
    more = tiny_config("lm", data, "vanilla", train={"compile": True, "max_steps": 5, "eval_every": 0})
    resumed = run_experiment(more, tmp_path / "compiled", resume=True, progress=False)
    assert resumed["steps"] == 5 and [p["step"] for p in resumed["curve"]] == [3, 5]


def test_a_missing_compiler_is_one_line(monkeypatch):
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    monkeypatch.setattr(inductor_config.cpp, "cxx", ("synthesizer-no-such-compiler",))
    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)  # a cached probe would not need the compiler
    with pytest.raises(ValueError, match=r"train.compile: torch.compile's inductor backend does not work on this "
                                         r"machine \(.*\); install a C\+\+ compiler") as info:
        check_backend("cpu")
    assert "\n" not in str(info.value)
    torch._dynamo.reset()
