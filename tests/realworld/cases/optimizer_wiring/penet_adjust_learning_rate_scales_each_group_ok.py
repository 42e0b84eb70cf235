"""PENet stage 3: backbone group built with lr/10, adjust_learning_rate scales each group by its own factor.

source: https://github.com/JUGGHM/PENet_ICRA2021/issues/29
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class args:
    lr = 0.02
    weight_decay = 1e-6


class PENet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())
        self.dcspn = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, x):
        return self.dcspn(self.backbone(x))


def adjust_learning_rate(lr_init, optimizer, epoch, args):
    lr = lr_init
    if epoch >= 10:
        lr = lr_init * 0.5
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr * param_group['lr_scale']
    return lr


model = PENet()
model_bone_params = [p for _, p in model.backbone.named_parameters() if p.requires_grad]
model_new_params = [p for _, p in model.named_parameters() if p.requires_grad]
model_new_params = list(set(model_new_params) - set(model_bone_params))
optimizer = torch.optim.Adam([{'params': model_bone_params, 'lr': args.lr / 10, 'lr_scale': 0.1},
                              {'params': model_new_params, 'lr_scale': 1.0}],
                             lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.99))
for actual_epoch in range(2):
    lr = adjust_learning_rate(args.lr, optimizer, actual_epoch, args)
    for i in range(3):
        x, gt = torch.randn(2, 4, 8, 8), torch.randn(2, 1, 8, 8)
        loss = nn.functional.mse_loss(model(x), gt)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print([g['lr'] for g in optimizer.param_groups])
