"""HTC FusedSemanticHead: x = self.lateral_convs[self.fusion_level](...) ends in a non-in-place ReLU whose output is saved for backward, and x += self.lateral_convs[i](feat) then accumulates the other levels into it in place.

source: https://github.com/open-mmlab/mmdetection/pull/8083
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def ConvModule(in_channels, out_channels, kernel_size, padding=0):
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding), nn.ReLU(inplace=False))


class FusedSemanticHead(nn.Module):
    def __init__(self, num_ins=3, fusion_level=1, num_convs=2, in_channels=8, conv_out_channels=16, num_classes=5):
        super(FusedSemanticHead, self).__init__()
        self.num_ins = num_ins
        self.fusion_level = fusion_level
        self.num_convs = num_convs
        self.lateral_convs = nn.ModuleList([ConvModule(in_channels, in_channels, 1) for _ in range(num_ins)])
        self.convs = nn.ModuleList(
            [ConvModule(in_channels if i == 0 else conv_out_channels, conv_out_channels, 3, padding=1) for i in range(num_convs)])
        self.conv_embedding = ConvModule(conv_out_channels, conv_out_channels, 1)
        self.conv_logits = nn.Conv2d(conv_out_channels, num_classes, 1)
        self.criterion = nn.CrossEntropyLoss(ignore_index=255)

    def forward(self, feats):
        x = self.lateral_convs[self.fusion_level](feats[self.fusion_level])
        fused_size = tuple(x.shape[-2:])
        for i, feat in enumerate(feats):
            if i != self.fusion_level:
                feat = F.interpolate(feat, size=fused_size, mode='bilinear', align_corners=True)
                x += self.lateral_convs[i](feat)  # ROOT
        for i in range(self.num_convs):
            x = self.convs[i](x)
        mask_pred = self.conv_logits(x)
        x = self.conv_embedding(x)
        return mask_pred, x

    def loss(self, mask_pred, labels):
        labels = labels.squeeze(1).long()
        return self.criterion(mask_pred, labels)


torch.manual_seed(0)
semantic_head = FusedSemanticHead()
optimizer = torch.optim.SGD(semantic_head.parameters(), lr=0.02, momentum=0.9)
for it in range(2):
    feats = [torch.randn(2, 8, 32 // 2 ** i, 32 // 2 ** i) for i in range(3)]
    gt_semantic_seg = torch.randint(0, 5, (2, 1, 16, 16))
    semantic_pred, semantic_feat = semantic_head(feats)
    loss_seg = semantic_head.loss(semantic_pred, gt_semantic_seg) + 0.0 * semantic_feat.mean()
    optimizer.zero_grad()
    loss_seg.backward()  # SYMPTOM
    optimizer.step()
