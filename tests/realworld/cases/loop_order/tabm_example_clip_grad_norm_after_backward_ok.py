"""TabM's example notebook as fixed: the gradients are clipped after loss.backward() and before optimizer.step().

source: https://github.com/yandex-research/tabm/issues/20
kind: lookalike
verified: the gradient norm the optimizer steps on is 1.0 at every step
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TabM(nn.Module):
    def __init__(self, n_num_features, d_block=64, k=4, d_out=1):
        super().__init__()
        self.k = k
        self.backbone = nn.Sequential(nn.Linear(n_num_features, d_block), nn.ReLU(),
                                      nn.Linear(d_block, d_block), nn.ReLU())
        self.output = nn.Linear(d_block, k * d_out)

    def forward(self, x_num):
        return self.output(self.backbone(x_num)).view(len(x_num), self.k, -1)


torch.manual_seed(0)
data = {'train': {'x_num': torch.randn(512, 8), 'y': torch.randn(512) * 10}}
model = TabM(n_num_features=8)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=3e-4)
gradient_clipping_norm = 1.0
share_training_batches = True


def apply_model(part, idx):
    return model(data[part]['x_num'][idx]).squeeze(-1).float()


def loss_fn(y_pred, y_true):
    k = y_pred.shape[1]
    return F.mse_loss(y_pred.flatten(0, 1), y_true.repeat_interleave(k))


batch_size = 128
for batch_idx in torch.randperm(len(data['train']['y'])).split(batch_size):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(apply_model('train', batch_idx), data['train']['y'][batch_idx])
    loss.backward()
    if gradient_clipping_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping_norm)
    optimizer.step()
