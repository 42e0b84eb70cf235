"""KL-divergence distillation loss fed the student's softmax where KLDivLoss expects log-probabilities.

source: https://github.com/sebastian-hofstaetter/matchmaker/issues/18
kind: bug
symptom: silent
verified: the reported loss ends at -1.37 while the true KL(teacher || student) ends at 4.23 (0.88 with log_softmax)
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class KLDivTeacherList(nn.Module):
    def __init__(self):
        super(KLDivTeacherList, self).__init__()
        self.kl = torch.nn.KLDivLoss(reduction="batchmean")

    def forward(self, scores, labels):
        loss = self.kl(scores.softmax(-1), labels.softmax(-1))  # ROOT
        return loss


ranker = nn.Linear(16, 1)
criterion = KLDivTeacherList()
optimizer = torch.optim.Adam(ranker.parameters(), lr=1e-2)
docs = torch.randn(8, 10, 16)
teacher_scores = torch.randn(8, 10) * 3
for step in range(200):
    scores = ranker(docs).squeeze(-1)
    loss = criterion(scores, teacher_scores)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
