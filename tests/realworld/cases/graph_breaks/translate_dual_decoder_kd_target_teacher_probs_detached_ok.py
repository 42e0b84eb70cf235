"""pytorch/translate dual decoder after the fix: the teacher probabilities used as KD targets are detached, so the KD loss trains only the student.

source: https://github.com/pytorch/translate/pull/391
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DualDecoderModel(nn.Module):
    def __init__(self, vocab=30, dim=16):
        super().__init__()
        self.encoder = nn.Embedding(vocab, dim)
        self.teacher_decoder = nn.GRU(dim, dim, batch_first=True)
        self.teacher_out = nn.Linear(dim, vocab)
        self.student_decoder = nn.GRU(dim, dim // 2, batch_first=True)
        self.student_out = nn.Linear(dim // 2, vocab)

    def forward(self, src_tokens):
        enc = self.encoder(src_tokens)
        teacher_logits = self.teacher_out(self.teacher_decoder(enc)[0])
        student_logits = self.student_out(self.student_decoder(enc)[0])
        return teacher_logits, student_logits


def compute_loss(model, src_tokens, target, kd_weight=0.5):
    teacher_logits, student_logits = model(src_tokens)
    vocab = teacher_logits.shape[-1]
    teacher_loss = F.cross_entropy(teacher_logits.reshape(-1, vocab), target.reshape(-1))
    student_nll = F.cross_entropy(student_logits.reshape(-1, vocab), target.reshape(-1))
    teacher_probs = F.softmax(teacher_logits, dim=-1).detach()
    student_lprobs = F.log_softmax(student_logits, dim=-1)
    kd_loss = -(teacher_probs * student_lprobs).sum(-1).mean()
    student_loss = (1 - kd_weight) * student_nll + kd_weight * kd_loss
    return teacher_loss + student_loss


torch.manual_seed(0)
model = DualDecoderModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    src_tokens, target = torch.randint(0, 30, (4, 7)), torch.randint(0, 30, (4, 7))
    optimizer.zero_grad()
    loss = compute_loss(model, src_tokens, target)
    loss.backward()
    optimizer.step()
