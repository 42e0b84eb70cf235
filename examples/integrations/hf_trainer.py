"""Hugging Face Trainer + gradtrace in one line: the callback names the cut encoder.

    python examples/integrations/hf_trainer.py

The bug on purpose: the classifier reads ``last_hidden_state.detach()``, so no gradient
reaches the BERT encoder and only the classifier trains. The callback prints the encoder's
parameters with the line of the ``.detach()``, logs the gradient flow through ``Trainer.log``
(see ``trainer.state.log_history``) and writes ``gradtrace.html`` in ``output_dir``.
A tiny BERT is built from a config: nothing is downloaded.
"""
import tempfile

import torch
from torch import nn
from transformers import BertConfig, BertModel, Trainer, TrainingArguments

from gradtrace.integrations.transformers import GradtraceCallback


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=64)
        self.encoder = BertModel(cfg, add_pooling_layer=False)
        self.classifier = nn.Linear(32, 2)

    def forward(self, input_ids, labels=None):
        h = self.encoder(input_ids=input_ids).last_hidden_state.detach()  # <- the cut
        logits = self.classifier(h[:, 0])
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


def main() -> None:
    torch.manual_seed(0)
    ids = torch.randint(0, 128, (64, 16))
    data = [{"input_ids": x, "labels": int(x[0] % 2)} for x in ids]
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="gradtrace-hf-"), max_steps=6,
                             per_device_train_batch_size=8, logging_steps=2, report_to=[],
                             save_strategy="no", disable_tqdm=True, use_cpu=True)
    cb = GradtraceCallback()
    trainer = Trainer(model=Classifier(), args=args, train_dataset=data, callbacks=[cb])
    trainer.train()
    for row in trainer.state.log_history:
        if "gradtrace/grad_norm_total" in row:
            print(row["step"], round(row["gradtrace/grad_norm_total"], 4))
    print("findings:", [f"{f.code} {f.path}:{f.line}" for f in cb.findings])


if __name__ == "__main__":
    main()
