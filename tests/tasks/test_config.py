import pytest

from synthesizer.errors import InputError
from synthesizer.tasks.config import ExperimentConfig, apply_override, resolve_config, shipped_configs

BASE = {"task": "lm", "data": {"corpus": "sotu"}, "model": {"d_model": 32, "n_heads": 2}, "train": {"max_steps": 5}}

SMALL = ["lm-sotu-small", "mt-bible-small", "mt-libreoffice-small", "summarization-debian-small",
         "dialogue-chitchat-small", "cls-rotten-small", "cls-spam-small"]
FULL = ["wmt14-ende-base", "wmt14-enfr-base", "lm1b-base", "cnndm-base", "personachat-base", "glue-base"]


def test_every_shipped_config_loads_and_round_trips():
    configs = shipped_configs()
    assert set(SMALL + FULL) <= set(configs)
    for name in configs:
        cfg = ExperimentConfig.from_file(name)
        assert ExperimentConfig(**cfg.to_dict()) == cfg
    base = ExperimentConfig.from_file("wmt14-ende-base")
    assert (base.model["d_model"], base.model["n_heads"], base.model["n_layers"], base.model["d_ff"]) == (512, 8, 6, 2048)


def test_overrides_from_the_command_line_are_typed(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("task: lm\ndata: {corpus: sotu}\ntrain: {max_steps: 5, lr: 1e-3}\n")
    cfg = ExperimentConfig.from_file(path, ["model.d_model=64", "train.lr=3e-4", "train.clip_norm=null",
                                            "model.attention=random+vanilla", "seed=7", "batch.block_size=32"])
    assert cfg.train["lr"] == pytest.approx(3e-4) and cfg.train["clip_norm"] is None
    assert cfg.model == {"d_model": 64, "attention": "random+vanilla"}
    assert cfg.seed == 7 and cfg.batch["block_size"] == 32
    assert ExperimentConfig.from_file(path).train["lr"] == pytest.approx(1e-3)  # YAML 1.1 "1e-3" is a string
    assert cfg.with_attention("R+V").model["attention"] == "random+vanilla"


@pytest.mark.parametrize("override, words", [
    ("model.d_modle=64", ["model.'d_modle'", "did you mean 'd_model'", "allowed keys"]),
    ("trian.max_steps=3", ["'trian'", "did you mean 'train'"]),
    ("train.foo=1", ["train.'foo'", "max_steps"]),
    ("model.vocab_size=100", ["model.'vocab_size'"]),
    ("model.attention=banana", ["unknown attention kind 'banana'", "vanilla"]),
    ("task=parsing", ["unknown task 'parsing'", "translation"]),
    ("batch.block_size=9999", ["batch.block_size=9999", "model.max_len=512"]),
    ("train.label_smoothing=1.5", ["label_smoothing"]),
    ("data.columns.txt=x", ["data.columns.'txt'", "text_column"]),
])
def test_bad_keys_and_values_name_the_option_and_the_allowed_values(override, words):
    with pytest.raises(ValueError) as err:
        ExperimentConfig.from_dict(BASE, [override])
    for word in words:
        assert word in str(err.value)


def test_data_needs_exactly_one_source_and_all_local_splits():
    with pytest.raises(ValueError, match="exactly one of"):
        ExperimentConfig.from_dict({**BASE, "data": {"corpus": "sotu", "hub": "lm1b"}})
    with pytest.raises(ValueError, match="data.test is missing"):
        ExperimentConfig.from_dict({**BASE, "data": {"train": "a.txt", "valid": "b.txt"}})


def test_file_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: lm\ndata: {corpus: sotu\n")
    with pytest.raises(ValueError, match=r"bad.yaml:\d+: invalid YAML"):
        ExperimentConfig.from_file(bad)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"task: lm\n# caf\xe9\n")
    with pytest.raises(InputError, match=r"latin.yaml: not UTF-8 text \(byte 14: invalid continuation byte\)"):
        ExperimentConfig.from_file(latin)  # bad input (one line on the command line), not a bug
    unknown = tmp_path / "u.yaml"
    unknown.write_text("task: lm\ndata: {corpus: sotu}\noptimizer: adam\n")
    with pytest.raises(ValueError, match=r"u.yaml: unknown config key 'optimizer'"):
        ExperimentConfig.from_file(unknown)
    with pytest.raises(ValueError, match="shipped configs: .*lm-sotu-small"):
        resolve_config("no-such-config")
    with pytest.raises(ValueError, match="key.sub=value"):
        apply_override({}, "train.max_steps")


# every section's values are type- and range-checked when the config is built, naming key, value and what is allowed
@pytest.mark.parametrize("override, words", [
    ("train.lr=abc", ["train.lr", "'abc'", "> 0"]),
    ("train.lr=-1", ["train.lr", "-1"]),
    ("train.clip_norm=abc", ["train.clip_norm", "'abc'", ">= 0"]),
    ("train.max_steps=1.5", ["train.max_steps", "1.5", "integer"]),
    ("train.warmup_steps=-3", ["train.warmup_steps", "-3", ">= 0"]),
    ("train.schedule=foo", ["train.schedule='foo'", "inverse_sqrt, cosine, constant"]),
    ("train.betas=[0.9]", ["train.betas", "[0.9]"]),
    ("train.weight_decay=abc", ["train.weight_decay", "'abc'"]),
    ("train.min_lr_ratio=2", ["train.min_lr_ratio", "[0, 1]"]),
    ("train.max_minutes=abc", ["train.max_minutes", "'abc'"]),
    ("train.amp=maybe", ["train.amp", "'maybe'", "true, false or null"]),
    ("train.deterministic=abc", ["train.deterministic", "true or false"]),
    ("train.divergence_factor=0.5", ["train.divergence_factor", "> 1"]),
    ("model.dropout=2", ["model.dropout", "[0, 1)"]),
    ("model.n_heads=3", ["model.d_model=32", "n_heads=3"]),
    ("model.d_model=abc", ["model.d_model", "'abc'"]),
    ("batch.max_tokens=0", ["batch.max_tokens", "positive integer", "0"]),
    ("batch.max_sentences=abc", ["batch.max_sentences", "'abc'"]),
    ("eval.length_penalty=abc", ["eval.length_penalty", "'abc'"]),
    ("eval.beam_size=1.5", ["eval.beam_size", "1.5"]),
    ("tokenizer.vocab_size=abc", ["tokenizer.vocab_size", "'abc'", ">= 262"]),
    ("tokenizer.min_frequency=0", ["tokenizer.min_frequency", "positive integer"]),
    ("data.limit=abc", ["data.limit", "'abc'"]),
    ("data.max_history=0", ["data.max_history", "positive integer"]),
    ("data.corpus=7", ["data.corpus", "7", "string"]),
    ("seed=abc", ["seed", "'abc'"]),
])
def test_every_value_is_type_and_range_checked_when_the_config_is_built(override, words):
    with pytest.raises(ValueError) as err:
        ExperimentConfig.from_dict(BASE, [override])
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("override, key", [("train.lr=abc", "train.lr"), ("train.clip_norm=abc", "train.clip_norm"),
                                           ("batch.max_tokens=0", "batch.max_tokens")])
def test_bad_values_stop_the_cli_before_a_run_folder_exists(override, key, tmp_path, capsys):
    from synthesizer.cli import main

    config = tmp_path / "c.yaml"
    config.write_text("task: lm\ndata: {corpus: sotu}\ntrain: {max_steps: 2}\n")
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--config", str(config), "--out", str(out), "--set", override])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("error: ") and key in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_sections_are_read_by_attribute_with_the_dataclasses_defaults():
    cfg = ExperimentConfig.from_dict(BASE, ["batch.max_src_len=48", "eval.beam_size=2"])
    assert (cfg.model.d_model, cfg.model.max_len, cfg.model.attention) == (32, 512, "vanilla")  # given, then defaults
    assert (cfg.train.max_steps, cfg.train.lr, cfg.train.clip_norm) == (5, 1e-3, 1.0)
    assert (cfg.batch.max_tokens, cfg.batch.max_src_len, cfg.batch.block_size) == (4096, 48, None)
    assert (cfg.eval.beam_size, cfg.eval.batch_size, cfg.eval.length_penalty) == (2, 64, 0.6)
    assert (cfg.tokenizer.vocab_size, cfg.data.corpus, cfg.data.max_history) == (8000, "sotu", 3)
    # the sections as written are what a run folder keeps: no default is added to them
    assert cfg.to_dict()["batch"] == {"max_src_len": 48} and "lr" not in cfg.to_dict()["train"]
    assert ExperimentConfig(**cfg.to_dict()) == cfg
    with pytest.raises(AttributeError, match="'batch' has no key 'max_tokenz'.*max_tokens"):
        cfg.batch.max_tokenz
    with pytest.raises(AttributeError, match="'model' has no key 'vocab_size'"):  # set from the tokenizer
        cfg.model.vocab_size
    no_steps = {**BASE, "train": {}}
    with pytest.raises(ValueError, match="train.max_steps is required"):
        ExperimentConfig.from_dict(no_steps).train.max_steps


@pytest.mark.parametrize("task, data, expected", [("translation", {"corpus": "bible-en-de"}, 0.1),
                                                  ("pretrain", {"corpora": ["sotu"]}, 0.0),
                                                  ("lm", {"corpus": "sotu"}, 0.0)])
def test_label_smoothing_has_one_default_per_task_and_a_given_value_wins(task, data, expected):
    cfg = ExperimentConfig.from_dict({"task": task, "data": data, "train": {"max_steps": 1}})
    assert cfg.label_smoothing == expected and cfg.resolved()["train"]["label_smoothing"] == expected
    given = ExperimentConfig.from_dict({"task": task, "data": data, "train": {"max_steps": 1, "label_smoothing": 0.2}})
    assert given.label_smoothing == 0.2


def test_print_config_shows_every_default_and_writes_nothing(tmp_path, capsys, monkeypatch):
    import yaml

    from synthesizer.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", "mt-libreoffice-small", "--attention", "dense", "--set", "eval.beam_size=3",
                 "--print-config"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["model"]["attention"] == "dense" and shown["eval"]["beam_size"] == 3
    assert shown["batch"]["max_sentences"] is None and shown["train"]["label_smoothing"] == 0.1
    assert set(shown) == {"task", "data", "model", "train", "tokenizer", "batch", "eval", "seed", "init_from"}
    assert "vocab_size" not in shown["model"] and "seed" not in shown["train"]  # derived or top-level
    assert not list(tmp_path.iterdir())


def test_no_section_is_read_with_a_restated_default():
    """Each default lives in its section's dataclass: reading ``cfg.<section>.get(key, default)`` would
    restate it, so the package reads sections by attribute."""
    import re
    from pathlib import Path

    pattern = re.compile(r"\b(cfg|config)\.(data|model|train|tokenizer|batch|eval)\.get\(")
    package = Path(__file__).resolve().parents[2] / "src" / "synthesizer"
    found = [f"{p.relative_to(package)}:{i}" for p in sorted(package.rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, found


def test_a_field_error_carries_its_field_and_takes_its_sections_name():
    from synthesizer.errors import FieldError

    with pytest.raises(FieldError) as err:
        ExperimentConfig.from_dict(BASE, ["train.warmup_steps=-1"])
    assert err.value.field == "train.warmup_steps" and str(err.value).startswith("train.warmup_steps must be")
    with pytest.raises(FieldError) as err:
        ExperimentConfig.from_dict(BASE, ["model.n_heads=3"])  # 32 is not divisible by 3: the check names d_model
    assert err.value.field == "model.d_model"
    with pytest.raises(ValueError, match="^model: unknown option 'foo'"):  # no field: the section names it
        ExperimentConfig.from_dict(BASE, ["model.attention_options={foo: 1}"])
    with pytest.raises(AssertionError):
        FieldError("lr", "the learning rate must be positive")  # the message must start with its field
