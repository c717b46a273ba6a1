"""Generated corpora: ListOps answers recomputed by an independent evaluator, the diagnostics' rules
reimplemented, determinism, lengths and the fixed vocabulary."""

from __future__ import annotations

import statistics

import pytest

from synthesizer.data import generated as g
from synthesizer.data.records import DataError
from synthesizer.data.sources import load_corpus


def eval_listops(text: str) -> int:
    """Value of a ListOps string by a stack machine over its tokens (not the generator's recursion)."""
    stack: list[list] = []
    result = None
    for tok in text.split():
        if tok.startswith("["):
            stack.append([tok])
        elif tok == "]":
            op, *args = stack.pop()
            if op == "[MAX":
                value = max(args)
            elif op == "[MIN":
                value = min(args)
            elif op == "[SM":
                value = sum(args) % 10
            else:
                assert op == "[MED"
                value = int(statistics.median(args))  # LRA: the median, cut to an integer
            if stack:
                stack[-1].append(value)
            else:
                result = value
        else:
            assert tok.isdigit() and len(tok) == 1
            if stack:
                stack[-1].append(int(tok))
            else:
                result = int(tok)
    assert not stack, "unbalanced brackets"
    return result


def depth_and_args(text: str) -> tuple[int, int]:
    depth = deepest = widest = 0
    counts: list[int] = []
    for tok in text.split():
        if tok.startswith("["):
            if counts:
                counts[-1] += 1
            depth += 1
            deepest = max(deepest, depth)
            counts.append(0)
        elif tok == "]":
            widest = max(widest, counts.pop())
            depth -= 1
        elif counts:
            counts[-1] += 1
    return deepest, widest


def test_listops_answers_match_an_independent_evaluator():
    rows = g.listops_split(400, 16, 254, seed=3)
    for row in rows:
        assert row["label"] == eval_listops(row["text"]), row["text"]
    assert len({row["label"] for row in rows}) == 10  # every class occurs


def test_listops_lengths_depth_and_arguments_within_limits():
    for lo, hi, n in ((16, 254, 300), (500, 2000, 5)):
        for row in g.listops_split(n, lo, hi, seed=1):
            assert lo <= len(row["text"].split()) <= hi
            deepest, widest = depth_and_args(row["text"])
            assert 1 <= deepest <= g.LISTOPS_MAX_DEPTH and 2 <= widest <= g.LISTOPS_MAX_ARGS
            assert row["label"] == eval_listops(row["text"])


@pytest.mark.parametrize("op,args,want", [("[MED", [1, 2], 1), ("[MED", [3, 9, 1], 3), ("[MED", [2, 3, 8, 9], 5),
                                          ("[SM", [9, 8, 7], 4), ("[MAX", [0, 7], 7), ("[MIN", [4, 2], 2)])
def test_listops_operators(op, args, want):
    assert g.listops_value(op, args) == want


def test_generators_are_deterministic_and_differ_across_seeds_and_splits():
    assert g.listops_split(50, 16, 254, seed=0) == g.listops_split(50, 16, 254, seed=0)
    assert g.listops_split(50, 16, 254, seed=0) != g.listops_split(50, 16, 254, seed=1)
    for kind in g.DIAGNOSTICS:
        assert g.diagnostic_split(kind, 50, seed=0) == g.diagnostic_split(kind, 50, seed=0)
        assert g.diagnostic_split(kind, 50, seed=0) != g.diagnostic_split(kind, 50, seed=1)
        assert g.diagnostic_split(kind, 50, 0, "train") != g.diagnostic_split(kind, 50, 0, "test")


def _recall_rule(words: list[str], answers: list[int], n_pairs: int, n_queries: int) -> None:
    q = words.index("?")
    pairs = dict(zip(words[0:q:2], words[1:q:2]))
    assert q == 2 * n_pairs and len(pairs) == n_pairs and all(k.startswith("k") for k in pairs)
    queries = words[q + 1 :: 2]
    assert len(queries) == n_queries == len(set(queries))
    assert answers == [q + 2 + 2 * i for i in range(n_queries)]
    for pos in answers:
        assert words[pos] == pairs[words[pos - 1]]


@pytest.mark.parametrize("kind", g.DIAGNOSTICS)
def test_diagnostic_answers_follow_their_rule(kind):
    for row in g.diagnostic_split(kind, 200, seed=5):
        words, answers = row["text"].split(), row["answers"]
        if kind in ("recall", "mqar", "mqar-long"):
            n_pairs, n_queries = {"recall": (8, 1), "mqar": (8, 4), "mqar-long": (16, 8)}[kind]
            _recall_rule(words, answers, n_pairs, n_queries)
            assert len(words) == 2 * n_pairs + 1 + 2 * n_queries
            continue
        if kind.startswith("mqar-zoology-"):
            _zoology_rule(words, answers, int(kind.rsplit("-", 1)[1]))
            continue
        if kind == "lookup":  # 8 pair tokens of distinct keys, ?, a key of them, its value
            pairs = dict(w.split("=") for w in words[:8])
            assert len(pairs) == 8 and words[8] == "?" and answers == [10] and len(words) == 11
            assert pairs[words[9]] == words[10]
            continue
        d = words.index("|")
        src, out = words[:d], words[d + 1 :]
        assert answers == list(range(d + 1, len(words)))
        if kind == "copy":
            assert 4 <= len(src) <= 12 and out == src
        else:
            assert len(src) == 12 and out == list(reversed(src))


def _zoology_rule(words: list[str], answers: list[int], length: int) -> None:
    """n pairs of distinct keys; every key queried once after them, in a two-token slot, its value scored."""
    assert len(words) == length
    n = len(answers)
    assert n in g.ZOOLOGY_PAIRS
    pairs = dict(zip(words[0 : 2 * n : 2], words[1 : 2 * n : 2]))
    assert len(pairs) == n and all(k in g.ZOOLOGY_KEYS for k in pairs) and all(v in g.ZOOLOGY_VALUES for v in pairs.values())
    assert all(a >= 2 * n + 1 and (a - 2 * n) % 2 == 1 for a in answers)  # the second token of a slot
    assert sorted(words[a - 1] for a in answers) == sorted(pairs)  # each key once
    for a in answers:
        assert words[a] == pairs[words[a - 1]]


def test_zoology_mqar_mixes_the_pair_counts_and_refuses_what_does_not_fit():
    import random
    counts = {len(r["answers"]) for r in g.diagnostic_split("mqar-zoology-64", 300)}
    assert counts == {4, 8, 16}
    with pytest.raises(ValueError, match="16 pairs and their 16 queries do not fit in 48 tokens"):
        g.zoology_mqar_example(random.Random(0), 48, (16,))
    assert g.GENERATED["diag-mqar-zoology-128"].n_answers == 512 and len(g.ZOOLOGY_VOCAB) == 1024
    # Zoology's 100,000 training rows: on 40,000 a width-128 vanilla fits the rows instead of learning the lookup
    assert all(g.GENERATED[f"diag-mqar-zoology-{n}"].sizes == (100000, 1000, 2000) for n in (64, 128))


def test_copy_lengths_vary_and_reverse_lengths_do_not():
    copy = {len(r["text"].split()) for r in g.diagnostic_split("copy", 200)}
    reverse = {len(r["text"].split()) for r in g.diagnostic_split("reverse", 200)}
    assert len(copy) == 9 and reverse == {25}


def test_load_corpus_generates_registered_names_with_limit():
    corpus = load_corpus("diag-recall", limit=7)
    assert corpus.task == "lm" and [len(corpus.splits[s]) for s in ("train", "valid", "test")] == [7, 7, 7]
    assert corpus.splits["train"] == g.diagnostic_split("recall", 7, 0, "train")
    assert load_corpus("diag-recall", limit=7).splits == corpus.splits
    listops = load_corpus("listops-256", limit=5)
    assert listops.task == "classification" and listops.label_names == list(g.DIGITS)
    with pytest.raises(DataError, match="listops-256"):
        load_corpus("listops-25")  # the error lists the generated names too


def test_fixed_tokenizer_is_one_token_per_word():
    tok = g.fixed_tokenizer()
    row = g.listops_split(1, 100, 254, seed=2)[0]
    ids = tok.encode(row["text"])
    assert len(ids) == len(row["text"].split()) and tok.unk_id not in ids
    assert tok.decode(ids) == row["text"]
    recall = g.diagnostic_split("mqar", 1)[0]["text"]
    assert len(tok.encode(recall)) == len(recall.split()) and tok.unk_id not in tok.encode(recall)
    assert (tok.pad_id, tok.cls_id, tok.sep_id) == (0, 5, 4)
