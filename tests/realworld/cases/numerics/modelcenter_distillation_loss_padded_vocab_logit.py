"""ModelCenter GPT-2 distillation: the padded vocabulary logit is -inf, so prob_t * log_prob_s is 0 * -inf = nan.

source: https://github.com/OpenBMB/ModelCenter/issues/14
kind: bug
symptom: silent
verified: the logged d_loss is nan (0 * -inf at the padded column; the gradients themselves stay finite)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GPT2(nn.Module):
    def __init__(self, vocab_size=10, dim_model=16):
        super().__init__()
        self.input_embedding = nn.Embedding(vocab_size, dim_model)
        self.transformer = nn.Linear(dim_model, dim_model)
        self.vocab_size = vocab_size

    def forward(self, input_ids):
        hidden = torch.tanh(self.transformer(self.input_embedding(input_ids)))
        logits = hidden @ self.input_embedding.weight.t()
        pad = torch.full((*logits.shape[:-1], 1), float("-inf"))
        return torch.cat([logits, pad], dim=-1)


torch.manual_seed(0)
teacher, student = GPT2(), GPT2()
optimizer = torch.optim.Adam(student.parameters(), lr=1e-4)
input_ids = torch.randint(0, 10, (4,))
with torch.no_grad():
    logits_t = teacher(input_ids)
logits_s = student(input_ids)
prob_t = F.softmax(logits_t, dim=-1)
log_prob_s = F.log_softmax(logits_s, dim=-1)
d_loss = -(prob_t * log_prob_s).sum(dim=1).mean()  # ROOT
optimizer.zero_grad()
d_loss.backward()
optimizer.step()
