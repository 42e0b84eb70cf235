"""The Hugging Face callback on the real Trainer with tiny models built from configs."""
from __future__ import annotations

import inspect
import math
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
# transformers (its Trainer pulls accelerate and torch._dynamo) is imported by the first test
# that needs it, never at collection: every xdist worker collects every module, and this
# import costs each of them ~3.5 s of CPU
pytestmark = pytest.mark.skipif(
    find_spec("transformers") is None or find_spec("accelerate") is None,
    reason="transformers and accelerate are needed")

from torch import nn  # noqa: E402

from gradtrace.runtime.trace.tracer import active_tracer  # noqa: E402


def _line(obj: object, text: str) -> int:
    lines, start = inspect.getsourcelines(obj)  # type: ignore[arg-type]
    return start + next(i for i, s in enumerate(lines) if text in s)


@cache
def _hf() -> None:
    """Imports transformers and the callback and defines Recorder (module globals), once per
    process, at the first test."""
    global BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback
    global TrainingArguments, hf, GradtraceCallback, NoGradientError, Recorder
    from transformers import (BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, Trainer,
                              TrainerCallback, TrainingArguments)

    import gradtrace.integrations.transformers as hf
    from gradtrace.integrations.transformers import GradtraceCallback, NoGradientError

    class Recorder(TrainerCallback):
        """What the gradients are at on_pre_optimizer_step (or at the optimizer's step)."""

        def __init__(self) -> None:
            self.norms: list[float] = []
            self.h0: list[float] = []

        def on_pre_optimizer_step(self, args, state, control, model=None, **kw):  # type: ignore
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            h0 = [p.grad for n, p in model.named_parameters() if n.startswith("transformer.h.0.")]
            self.norms.append(float(torch.nn.utils.get_total_norm(grads)))
            self.h0.append(float(torch.nn.utils.get_total_norm(h0)))


@pytest.fixture(autouse=True)
def _transformers_loaded() -> None:
    _hf()  # the imports and the class above: every test of this module reads them


def _gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg)


def _tokens(n: int = 16) -> list[dict[str, torch.Tensor]]:
    ids = torch.randint(1, 64, (n, 8), generator=torch.Generator().manual_seed(0))
    return [{"input_ids": r, "labels": r} for r in ids]


def _train(model: nn.Module, tmp_path: Path, callbacks: list, steps: int = 3,
           **kw: object) -> Trainer:
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=steps,
                             per_device_train_batch_size=4, logging_steps=1, report_to=[],
                             save_strategy="no", disable_tqdm=True, use_cpu=True, seed=0,
                             **kw)
    trainer = Trainer(model=model, args=args, train_dataset=_tokens(), callbacks=callbacks)
    trainer.train()
    return trainer


def _ours(trainer: Trainer) -> dict[int, dict[str, float]]:
    return {h["step"]: h for h in trainer.state.log_history
            if "gradtrace/grad_norm_total" in h}


def test_logged_norm_is_the_clipped_one_through_trainer_log(tmp_path: Path) -> None:
    rec, cb = Recorder(), GradtraceCallback()
    trainer = _train(_gpt2(), tmp_path, [rec, cb], max_grad_norm=0.01)
    ours = _ours(trainer)
    assert sorted(ours) == [1, 2, 3]  # HF's 1-based steps, through Trainer.log
    theirs = {h["step"]: h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h}
    for step in (1, 2, 3):
        row = ours[step]
        assert row["gradtrace/grad_norm_total"] == pytest.approx(rec.norms[step - 1], rel=1e-5)
        assert row["gradtrace/grad_norm_total"] == pytest.approx(0.01, rel=1e-4)  # clipped
        assert theirs[step] > 0.1  # the Trainer's own log (kept) is the unclipped norm
        assert row["gradtrace/grad_norm/h.0"] == pytest.approx(rec.h0[step - 1], rel=1e-5)
        groups = [k for k in row if k.startswith("gradtrace/grad_norm/")]
        assert sorted(groups) == sorted(f"gradtrace/grad_norm/{g}"
                                        for g in ("wte", "wpe", "h.0", "h.1", "ln_f"))
        assert math.sqrt(sum(row[k] ** 2 for k in groups)) == pytest.approx(
            row["gradtrace/grad_norm_total"], rel=1e-5)
        assert row["gradtrace/update_ratio/h.0"] > 0
    report = tmp_path / "gradtrace.html"
    assert cb.report_path == report and report.exists()
    assert cb.findings == []


def test_without_on_pre_optimizer_step_the_optimizer_hook_sees_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf, "HAS_PRE_STEP", False)  # as on transformers < 4.45
    rec, cb = Recorder(), GradtraceCallback(every=2, report=False)
    trainer = _train(_gpt2(), tmp_path, [rec, cb], steps=4, max_grad_norm=0.5)
    assert sorted(_ours(trainer)) == [2, 4]
    assert [m["gradtrace/grad_norm_total"] for _, m in cb.logged] == pytest.approx(
        [rec.norms[1], rec.norms[3]], rel=1e-5)
    inner = hf._torch_optimizer(trainer.optimizer)
    assert not inner._optimizer_step_pre_hooks  # the callback's hook is gone


def test_once_per_optimizer_step_under_accumulation(tmp_path: Path) -> None:
    rec, cb = Recorder(), GradtraceCallback(report=False)
    _train(_gpt2(), tmp_path, [rec, cb], steps=2, gradient_accumulation_steps=2)
    assert [s for s, _ in cb.logged] == [1, 2]
    assert [m["gradtrace/grad_norm_total"] for _, m in cb.logged] == pytest.approx(
        rec.norms, rel=1e-5)


class Tagger(nn.Module):
    """A tiny BERT encoder with a detached classifier input and an unused extra head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bert = BertModel(BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=32,
                                         max_position_embeddings=16),
                              add_pooling_layer=False)
        self.head = nn.Linear(16, 64)
        self.extra = nn.Linear(16, 3)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> dict:
        h = self.bert(input_ids=input_ids).last_hidden_state.detach()
        logits = self.head(h)
        return {"loss": nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()),
                "logits": logits}


def test_cut_encoder_and_unused_head_are_named_with_their_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cb = GradtraceCallback(report=False)
    _train(Tagger(), tmp_path, [cb], steps=3)
    here = Path(__file__).name
    cut = next(f for f in cb.findings if "bert.embeddings.word_embeddings.weight" in f.message)
    assert cut.path.endswith(here) and cut.line == _line(Tagger.forward, ".detach()")
    assert "bert.encoder.layer.1.output.dense.bias" in cut.message or "more" in cut.message
    extra = next(f for f in cb.findings if "extra.weight" in f.message)
    assert extra.path.endswith(here) and extra.line == _line(Tagger.__init__, "self.extra")
    assert not any("head." in f.message for f in cb.findings)
    assert capsys.readouterr().err.count("without a gradient in the first 3") == 1


def test_fail_fast_raises_before_the_first_step_and_cleans_up(tmp_path: Path) -> None:
    from torch.nn.modules import module as mm

    before = (len(mm._global_forward_pre_hooks), len(mm._global_forward_hooks))
    model = Tagger()
    w0 = model.head.weight.detach().clone()
    with pytest.raises(NoGradientError) as info:
        _train(model, tmp_path, [GradtraceCallback(fail_fast=True)], steps=3)
    assert torch.equal(model.head.weight, w0)  # no optimizer step was taken
    assert any("extra.weight" in f.message for f in info.value.findings)
    assert active_tracer() is None
    assert before == (len(mm._global_forward_pre_hooks), len(mm._global_forward_hooks))
