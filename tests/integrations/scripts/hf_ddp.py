"""The HF Trainer under torchrun (2 CPU processes, gloo) with an unused head; each rank
writes what the callback found to OUT/rank<r>.json."""
import json
import os
import sys

import torch
from torch import nn
from transformers import BertConfig, BertModel, Trainer, TrainingArguments

from gradtrace.integrations.transformers import GradtraceCallback


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.bert = BertModel(BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, intermediate_size=32,
                                         max_position_embeddings=16), add_pooling_layer=False)
        self.head = nn.Linear(16, 64)
        self.extra = nn.Linear(16, 3)  # <- unused

    def forward(self, input_ids, labels):
        logits = self.head(self.bert(input_ids=input_ids).last_hidden_state)
        return {"loss": nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())}


out = sys.argv[1]
ids = torch.randint(1, 64, (32, 8), generator=torch.Generator().manual_seed(0))
args = TrainingArguments(output_dir=out, max_steps=3, per_device_train_batch_size=4,
                         logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True,
                         use_cpu=True, ddp_backend="gloo", seed=0, max_grad_norm=0.0)
cb = GradtraceCallback()
trainer = Trainer(model=Tagger(), args=args, callbacks=[cb],
                  train_dataset=[{"input_ids": r, "labels": r} for r in ids])
trainer.train()
with open(os.path.join(out, f"rank{os.environ['RANK']}.json"), "w") as fh:
    json.dump({"findings": [f.to_dict() for f in cb.findings], "logged": cb.logged}, fh)
# as torch asks of every distributed script: a group left to interpreter exit can abort the
# process in gloo's teardown ("terminate called without an active exception", seen in CI once)
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()
