"""KL-divergence distillation loss on the student's log_softmax against the teacher's softmax.

source: https://github.com/sebastian-hofstaetter/matchmaker/issues/18
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class KLDivTeacherList(nn.Module):
    def __init__(self):
        super(KLDivTeacherList, self).__init__()
        self.kl = torch.nn.KLDivLoss(reduction="batchmean")

    def forward(self, scores, labels):
        loss = self.kl(torch.nn.functional.log_softmax(scores, dim=-1),
                       torch.nn.functional.softmax(labels, dim=-1))
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
