"""CoNet trainer: the predicted depth maps are [B, 1, H, W] but the ground-truth depth is [B, H, W], so F.smooth_l1_loss(high_depth, depth, reduction='sum') broadcasts them to [B, B, H, W] and compares every prediction with every sample's depth (torch only warns).

source: https://github.com/jiwei0921/CoNet/issues/3
kind: bug
symptom: silent
verified: at the last step loss4 is 41.6 where the loss of the same predictions against their own depths (depth.unsqueeze(1)) is 20.9; torch only warns about the target size
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CoNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.depth_head = nn.Conv2d(8, 1, 1)
        self.sal_head = nn.Conv2d(8, 1, 1)

    def forward(self, img):
        f = self.backbone(img)
        high_depth = torch.sigmoid(self.depth_head(f))
        pred_sal = self.sal_head(f)
        return high_depth, pred_sal


torch.manual_seed(0)
model = CoNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
for it in range(2):
    img, depth, gt = torch.rand(2, 3, 16, 16), torch.rand(2, 16, 16), (torch.rand(2, 1, 16, 16) > 0.5).float()
    high_depth, pred_sal = model(img)
    loss1 = F.binary_cross_entropy_with_logits(pred_sal, gt, reduction='sum')
    loss4 = F.smooth_l1_loss(high_depth, depth, reduction='sum')  # ROOT
    loss = loss1 + loss4
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss4.item(), F.smooth_l1_loss(high_depth, depth.unsqueeze(1), reduction='sum').item())
