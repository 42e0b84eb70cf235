"""Bottom-up attention VQA classifier: the Dropout after the ReLU is out of place (the fix), so the ReLU output stays as saved.

source: https://github.com/BierOne/bottom-up-attention-vqa/issues/6
kind: lookalike
"""
import torch
import torch.nn as nn


class FCNet(nn.Module):
    def __init__(self, dims, dropout=0.0):
        super().__init__()
        self.main = nn.Sequential(nn.Dropout(dropout), nn.Linear(dims[0], dims[1]), nn.ReLU())

    def forward(self, x):
        return self.main(x)


class SimpleClassifier(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim, dropout=0.0):
        super().__init__()
        self.q_net = FCNet([in_dim[0], hid_dim[0]], dropout)
        self.v_net = FCNet([in_dim[1], hid_dim[0]], dropout)
        self.main = nn.Sequential(
            nn.Linear(hid_dim[0], hid_dim[1]),
            nn.ReLU(),
            nn.Dropout(dropout, inplace=False),
            nn.Linear(hid_dim[1], out_dim),
        )

    def forward(self, q_emb, v_emb):
        joint_repr = self.q_net(q_emb) * self.v_net(v_emb)
        return self.main(joint_repr)


torch.manual_seed(0)
classifier = SimpleClassifier((16, 24), (32, 64), 10, dropout=0.5)
optim = torch.optim.Adamax(classifier.parameters())
q_emb, v_emb = torch.randn(8, 16), torch.randn(8, 24)
answers = torch.rand(8, 10)
logits = classifier(q_emb, v_emb)
loss = nn.functional.binary_cross_entropy_with_logits(logits, answers)
loss.backward()
optim.step()
optim.zero_grad()
