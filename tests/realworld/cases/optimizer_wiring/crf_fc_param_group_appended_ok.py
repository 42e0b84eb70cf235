"""Every parameter group, the CRF and classifier included, is appended before the optimizer is built.

source: https://github.com/zjunlp/HVPNeT/issues/5
kind: lookalike
verified: model.fc.weight changes during training
"""
import torch
import torch.nn as nn


class NERModel(nn.Module):
    def __init__(self, num_labels=5):
        super().__init__()
        self.bert = nn.Embedding(100, 16)
        self.vis_encoder = nn.Linear(8, 16)
        self.fc = nn.Linear(16, num_labels)
        self.crf_transitions = nn.Parameter(torch.randn(num_labels, num_labels))

    def forward(self, ids, img):
        h = self.bert(ids) + self.vis_encoder(img).unsqueeze(1)
        emissions = self.fc(h)
        return emissions + emissions.softmax(-1) @ self.crf_transitions


def build_optimizer(model, lr=1e-2, crf_lr=5e-2):
    parameters = []
    params = {'lr': lr, 'weight_decay': 1e-2}
    params['params'] = [p for n, p in model.named_parameters() if n.startswith('bert')]
    parameters.append(params)
    params = {'lr': lr, 'weight_decay': 1e-2}
    params['params'] = [p for n, p in model.named_parameters() if n.startswith('vis_encoder')]
    parameters.append(params)
    params = {'lr': crf_lr, 'weight_decay': 1e-2}
    params['params'] = [p for n, p in model.named_parameters() if n.startswith('crf') or n.startswith('fc')]
    parameters.append(params)
    return torch.optim.AdamW(parameters)


torch.manual_seed(0)
model = NERModel()
optimizer = build_optimizer(model)
before = model.fc.weight.detach().clone()
ids, img, labels = torch.randint(0, 100, (4, 6)), torch.randn(4, 8), torch.randint(0, 5, (4, 6))
for _ in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(ids, img).reshape(-1, 5), labels.reshape(-1))
    loss.backward()
    optimizer.step()
print(torch.equal(before, model.fc.weight.detach()))
