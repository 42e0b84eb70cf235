"""TextBrewer after commit 41a1389: `flsw_temperature_scheduler_builder` takes `eps=1e-4` and divides the detached logits by `norm + eps`, so all-zero logits (masked padded positions) give a zero direction and a finite temperature instead of 0/0, and distillation with the flsw temperature trains.

source: https://github.com/airaria/TextBrewer/commit/41a138996621fa00c89a5cb673c3aebdfa1374f0
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def flsw_temperature_scheduler_builder(beta, gamma, eps=1e-4, *args):
    """adapted from arXiv:1911.07471"""

    def flsw_temperature_scheduler(logits_S, logits_T, base_temperature):
        v = logits_S.detach()
        t = logits_T.detach()
        with torch.no_grad():
            v = v / (torch.norm(v, dim=-1, keepdim=True) + eps)
            t = t / (torch.norm(t, dim=-1, keepdim=True) + eps)
            w = torch.pow((1 - (v * t).sum(dim=-1)), gamma)
            tau = base_temperature + (w.mean() - w) * beta
        return tau

    return flsw_temperature_scheduler


def kd_ce_loss(logits_S, logits_T, temperature=1):
    if isinstance(temperature, torch.Tensor) and temperature.dim() > 0:
        temperature = temperature.unsqueeze(-1)
    beta_logits_T = logits_T / temperature
    beta_logits_S = logits_S / temperature
    p_T = F.softmax(beta_logits_T, dim=-1)
    loss = -(p_T * F.log_softmax(beta_logits_S, dim=-1)).sum(dim=-1).mean()
    return loss


class Tagger(nn.Module):
    def __init__(self, vocab=50, dim=32, num_labels=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, input_ids, attention_mask):
        hidden, _ = self.encoder(self.embed(input_ids))
        return self.classifier(hidden) * attention_mask.unsqueeze(-1)


teacher, student = Tagger(dim=64), Tagger(dim=32)
temperature_scheduler = flsw_temperature_scheduler_builder(beta=1, gamma=2)
optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
for step in range(3):
    input_ids = torch.randint(1, 50, (4, 12))
    attention_mask = torch.ones(4, 12)
    attention_mask[1, 9:] = 0  # a shorter sentence, padded to the batch length
    with torch.no_grad():
        logits_T = teacher(input_ids, attention_mask)
    logits_S = student(input_ids, attention_mask)
    temperature = temperature_scheduler(logits_S, logits_T, 4.0)
    loss = kd_ce_loss(logits_S, logits_T, temperature)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    nan_params = sum(torch.isnan(p).any().item() for p in student.parameters())
    print(f"step {step}: kd loss {loss.item():.4f}; NaN temperatures {torch.isnan(temperature).sum().item()}; "
          f"student tensors with NaN {nan_params}/{len(list(student.parameters()))}")
