"""mmdetection's RPNHead with num_convs=2 with the fix given in the thread: forward_single applies F.relu(x, inplace=False) after the in-place ConvModule stack, so the ReLU output saved for backward is left intact and the two-conv head trains.

source: https://github.com/open-mmlab/mmdetection/issues/7933
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvModule(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding=0, inplace=True):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding)
        self.activate = nn.ReLU(inplace=inplace)

    def forward(self, x):
        return self.activate(self.conv(x))


class RPNHead(nn.Module):
    def __init__(self, in_channels, feat_channels=16, num_anchors=3, num_convs=2):
        super().__init__()
        self.in_channels, self.feat_channels, self.num_convs = in_channels, feat_channels, num_convs
        rpn_convs = []
        for i in range(self.num_convs):
            in_ch = self.in_channels if i == 0 else self.feat_channels
            rpn_convs.append(ConvModule(in_ch, self.feat_channels, 3, padding=1))
        self.rpn_conv = nn.Sequential(*rpn_convs)
        self.rpn_cls = nn.Conv2d(self.feat_channels, num_anchors, 1)
        self.rpn_reg = nn.Conv2d(self.feat_channels, num_anchors * 4, 1)

    def forward_single(self, x):
        x = self.rpn_conv(x)
        x = F.relu(x, inplace=False)
        return self.rpn_cls(x), self.rpn_reg(x)


torch.manual_seed(0)
head = RPNHead(8)
optimizer = torch.optim.SGD(head.parameters(), lr=0.01)
feats = [torch.randn(2, 8, 16, 16), torch.randn(2, 8, 8, 8)]
losses = []
for feat in feats:
    cls_score, bbox_pred = head.forward_single(feat)
    labels = (torch.rand_like(cls_score) > 0.5).float()
    losses.append(F.binary_cross_entropy_with_logits(cls_score, labels) + bbox_pred.abs().mean())
loss = sum(losses)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss.item())
