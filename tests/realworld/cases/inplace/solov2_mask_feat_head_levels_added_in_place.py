"""pytorch_solov2's MaskFeatHead sums the FPN levels with feature_add_all_level += self.convs_all_levels[i](input_p), where feature_add_all_level is the level-0 branch's output, the output of a ReLU that its backward saved; the three in-place additions bump its version and backward fails.

source: https://github.com/OpenFirework/pytorch_solov2/issues/22
kind: bug
symptom: crash
verified: which is output 0 of Relu, is at version 3; expected version 0 instead
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_gn_relu(in_ch, out_ch):
    return nn.Sequential(nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False), nn.GroupNorm(4, out_ch), nn.ReLU())


class MaskFeatHead(nn.Module):
    def __init__(self, in_channels=8, out_channels=8, start_level=0, end_level=3, num_classes=16):
        super().__init__()
        self.start_level, self.end_level = start_level, end_level
        self.convs_all_levels = nn.ModuleList()
        for i in range(start_level, end_level + 1):
            convs = [conv_gn_relu(in_channels, out_channels)]
            for _ in range(i):
                convs.append(nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False))
            self.convs_all_levels.append(nn.Sequential(*convs))
        self.conv_pred = nn.Sequential(nn.Conv2d(out_channels, num_classes, 1), nn.GroupNorm(4, num_classes), nn.ReLU())

    def forward(self, inputs):
        feature_add_all_level = self.convs_all_levels[0](inputs[0])
        for i in range(1, len(inputs)):
            input_p = inputs[i]
            feature_add_all_level += self.convs_all_levels[i](input_p)  # ROOT
        return self.conv_pred(feature_add_all_level)


torch.manual_seed(0)
head = MaskFeatHead()
optimizer = torch.optim.SGD(head.parameters(), lr=0.01)
inputs = [torch.randn(2, 8, 16 // 2 ** i, 16 // 2 ** i) for i in range(4)]
mask_feat = head(inputs)
loss = F.mse_loss(mask_feat, torch.rand_like(mask_feat))
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
print(loss.item())
