import pytest

from synthesizer.models import ModelConfig


def test_json_round_trip_is_exact():
    config = ModelConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, n_decoder_layers=3, max_len=16,
                         attention="random+vanilla", attention_options={"mix_per_head": True, "impl": "reference"},
                         positions="sinusoidal", tie_embeddings=False, n_classes=1, dropout=0.25)
    again = ModelConfig.from_json(config.to_json())
    assert again == config
    assert ModelConfig.from_dict(config.to_dict()) == config
    assert again.to_json() == config.to_json()


def test_unknown_key_is_named_with_the_valid_keys():
    with pytest.raises(ValueError) as err:
        ModelConfig.from_dict({"vocab_size": 50, "n_head": 4})
    message = str(err.value)
    assert "'n_head'" in message and "did you mean 'n_heads'" in message and "vocab_size" in message and "max_len" in message


@pytest.mark.parametrize("changes, words", [
    ({"attention": "ranodm"}, ["'ranodm'", "factorized_random", "linformer"]),
    ({"positions": "rotary"}, ["positions", "learned", "sinusoidal"]),
    ({"cross_attention": "dense"}, ["cross_attention", "vanilla", "random"]),
    ({"attention_options": {"kk": 2}}, ["'kk'", "fd_split"]),
    ({"d_model": 30}, ["d_model=30", "n_heads=4"]),
    ({"on_too_long": "cut"}, ["'cut'", "truncate"]),
    ({"tie_embeddings": "abc"}, ["tie_embeddings", "'abc'", "true or false"]),
    ({"dropout": True}, ["dropout", "True", "[0, 1)"]),
])
def test_bad_values_name_the_option_and_the_allowed_values(changes, words):
    with pytest.raises(ValueError) as err:
        ModelConfig(**{"vocab_size": 50, "d_model": 32, "n_heads": 4, **changes})
    for word in words:
        assert word in str(err.value)
