"""TAPE's `TaskRunner._run_train_epoch` begins with `torch.set_grad_enabled(False)` (a copy of the line that opens `_run_valid_epoch`), so the whole training epoch runs with autograd globally off and the first `loss.backward()` fails: the masked-LM loss has no grad_fn.

source: https://github.com/songlab-cal/tape/commit/658f09234b82d039ead543456fd3640ddefc5aeb
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
VOCAB, HIDDEN, SEQ = 25, 32, 20


class MaskedLMTransformer(nn.Module):
    """Stands in for TAPE's `TransformerForMaskedLM`: returns `(loss,)` when masked-LM labels are given."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(HIDDEN, 4, 64, batch_first=True), 2, enable_nested_tensor=False)
        self.lm_head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, input_ids, attention_mask=None, masked_lm_labels=None):
        hidden = self.encoder(self.embed(input_ids), src_key_padding_mask=attention_mask == 0)
        logits = self.lm_head(hidden)
        loss = F.cross_entropy(logits.view(-1, VOCAB), masked_lm_labels.view(-1), ignore_index=-1)
        return (loss, logits)


def make_batches(n):
    batches = []
    for _ in range(n):
        input_ids = torch.randint(0, VOCAB, (8, SEQ))
        labels = torch.full_like(input_ids, -1)
        mask = torch.rand(input_ids.shape) < 0.15
        labels[mask] = input_ids[mask]
        batches.append((input_ids, torch.ones_like(input_ids), labels))
    return batches


class TaskRunner:
    def __init__(self):
        self.model = MaskedLMTransformer()
        self.gradient_accumulation_steps = 1
        self.max_grad_norm = 1.0
        self._iter_id = 0
        self._global_step = 0

    def train(self, train_loader, valid_loader, num_train_epochs=2):
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 4))
        for epoch_id in range(num_train_epochs):
            self._run_train_epoch(epoch_id, train_loader, optimizer, scheduler)
            self._run_valid_epoch(epoch_id, valid_loader)

    def _run_train_epoch(self, epoch_id, train_loader, optimizer, scheduler):
        train_loss = 0
        torch.set_grad_enabled(False)  # ROOT
        self.model.train()
        for step, batch in enumerate(train_loader):
            self._iter_id += 1
            input_ids, input_mask, lm_label_ids = batch
            outputs = self.model(input_ids, attention_mask=input_mask, masked_lm_labels=lm_label_ids)
            loss = outputs[0]
            if self.gradient_accumulation_steps > 1:
                loss = loss / self.gradient_accumulation_steps
            loss.backward()
            train_loss += loss.item()
            if (step + 1) % self.gradient_accumulation_steps == 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                self._global_step += 1
        print(f"epoch {epoch_id}: train loss {train_loss / len(train_loader):.4f}")

    def _run_valid_epoch(self, epoch_id, valid_loader):
        eval_loss = 0.
        torch.set_grad_enabled(False)
        self.model.eval()
        for batch in valid_loader:
            input_ids, input_mask, lm_label_ids = batch
            eval_loss += self.model(input_ids, attention_mask=input_mask, masked_lm_labels=lm_label_ids)[0].item()
        print(f"epoch {epoch_id}: valid loss {eval_loss / len(valid_loader):.4f}")


runner = TaskRunner()
runner.train(make_batches(4), make_batches(2))
