"""SOTR's mask branch with the fix from the report's thread: the FPN levels are summed out of place (`feature_add_all_level = feature_add_all_level + ...`), so the ReLU output the first level saved for backward is left untouched and the branch trains.

source: https://github.com/easton-cau/SOTR/issues/19
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_gn_relu(in_ch, out_ch):
    return nn.Sequential(nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False),
                         nn.GroupNorm(4, out_ch), nn.ReLU())


class MaskBranch(nn.Module):
    def __init__(self, in_ch=16, mid_ch=16, num_levels=3, num_masks=8):
        super().__init__()
        self.num_levels = num_levels
        self.convs_all_levels = nn.ModuleList()
        for i in range(num_levels):
            if i == 0:
                self.convs_all_levels.append(conv_gn_relu(in_ch, mid_ch))
            else:
                layers = []
                for j in range(i):
                    layers.append(conv_gn_relu(in_ch if j == 0 else mid_ch, mid_ch))
                    layers.append(nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False))
                self.convs_all_levels.append(nn.Sequential(*layers))
        self.conv_pred = nn.Conv2d(mid_ch, num_masks, 1)

    def forward(self, features):
        feature_add_all_level = self.convs_all_levels[0](features[0])
        for i in range(1, self.num_levels):
            mask_feat = features[i]
            feature_add_all_level = feature_add_all_level + self.convs_all_levels[i](mask_feat)
        return self.conv_pred(feature_add_all_level)


def train_step(branch, optimizer, features, target):
    pred = branch(features)
    loss = F.binary_cross_entropy_with_logits(pred, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


torch.manual_seed(0)
branch = MaskBranch()
optimizer = torch.optim.SGD(branch.parameters(), lr=0.01, momentum=0.9)
for it in range(10):
    features = [torch.randn(2, 16, 32, 32), torch.randn(2, 16, 16, 16), torch.randn(2, 16, 8, 8)]
    target = (torch.rand(2, 8, 32, 32) > 0.5).float()
    loss = train_step(branch, optimizer, features, target)
print("loss %.4f" % loss)
