"""NER span model built with CrossEntropyLoss(reduction='none'): backward on the per-token loss.

source: https://github.com/z814081807/DeepNER/issues/19
kind: bug
symptom: crash
verified: RuntimeError: grad can be implicitly created only for scalar outputs
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class SpanModel(nn.Module):
    def __init__(self, hidden=8, num_tags=5, loss_type="ce"):
        super().__init__()
        self.start_fc = nn.Linear(hidden, num_tags)
        reduction = "none"
        if loss_type == "ce":
            self.criterion = nn.CrossEntropyLoss(reduction=reduction)  # ROOT

    def forward(self, seq_out, start_ids):
        start_logits = self.start_fc(seq_out).view(-1, 5)
        return self.criterion(start_logits, start_ids.view(-1))


model = SpanModel()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
loss = model(torch.randn(2, 6, 8), torch.randint(0, 5, (2, 6)))
loss.backward()  # SYMPTOM
optimizer.step()
