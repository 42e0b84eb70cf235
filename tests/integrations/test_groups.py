"""Layer groups of the logged series: tens of series for deep models, named by block."""
from __future__ import annotations

from gradtrace.integrations._common import merge_named
from gradtrace.integrations._flow import layer_groups
from gradtrace.findings import Finding


def test_blocks_and_top_modules() -> None:
    names = ["model.bert.embeddings.word_embeddings.weight",
             "model.bert.encoder.layer.3.attention.self.query.weight",
             "model.bert.encoder.layer.11.output.dense.bias",
             "model.bert.pooler.dense.weight", "model.classifier.weight"]
    assert layer_groups(names) == ["bert.embeddings", "bert.encoder.layer.3",
                                   "bert.encoder.layer.11", "bert.pooler", "classifier"]


def test_hundred_layers_make_tens_of_series() -> None:
    names = ["embed.weight"] + [f"layers.{i}.{k}.weight" for i in range(100)
                                for k in ("attn", "mlp")] + ["head.weight", "head.bias"]
    groups = layer_groups(names)
    assert 10 <= len(set(groups)) <= 32
    assert groups[0] == "embed" and groups[-1] == "head"
    assert groups[1 + 2 * 5] == "layers.4-7"  # 100 blocks in buckets of 4
    assert groups[1 + 2 * 99] == "layers.96-99"


def test_root_parameter_and_plain_modules() -> None:
    assert layer_groups(["scale", "fc1.weight", "fc2.bias"]) == ["(top)", "fc1", "fc2"]


def test_merge_per_parameter_findings_with_the_same_reason() -> None:
    why = " never received a gradient: its module never ran in a forward pass"
    fs = [Finding("GT820", "x", n + why, "m.py", 3, source="runtime") for n in ("a.w", "a.b")]
    other = Finding("GT820", "x", "c.w" + why, "m.py", 9, source="runtime")
    out = merge_named(fs + [other])
    assert [f.message.split(" never")[0] for f in out] == ["a.w, a.b", "c.w"]
