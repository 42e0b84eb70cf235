"""torchvision's resnet_fpn_backbone after the pull request for the issue: the number of trainable backbone layers depends on whether the backbone is pretrained (3 if so, all 5 otherwise), so a detector trained from scratch trains conv1, bn1 and layer1 too.

source: https://github.com/pytorch/vision/issues/2164
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layer3 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layer4 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())

    def forward(self, x):
        x = self.layer1(F.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(x)))


def resnet_fpn_backbone(backbone_name, pretrained):
    backbone = ResNet()
    if pretrained:
        pass  # would load the ImageNet weights here
    # freeze layers only if the backbone starts from pretrained weights
    trainable_layers = 3 if pretrained else 5
    layers_to_train = ['layer4', 'layer3', 'layer2', 'layer1', 'conv1'][:trainable_layers]
    if trainable_layers == 5:
        layers_to_train.append('bn1')
    for name, parameter in backbone.named_parameters():
        if all([not name.startswith(layer) for layer in layers_to_train]):
            parameter.requires_grad_(False)
    backbone.out_channels = 16
    return backbone


class FasterRCNN(nn.Module):
    def __init__(self, backbone, num_classes):
        super().__init__()
        self.backbone = backbone
        self.fpn = nn.Conv2d(backbone.out_channels, 16, 1)
        self.roi_heads = nn.Linear(16, num_classes)

    def forward(self, images):
        features = F.relu(self.fpn(self.backbone(images)))
        return self.roi_heads(features.mean((2, 3)))


def fasterrcnn_resnet50_fpn(pretrained=False, num_classes=91, pretrained_backbone=True):
    if pretrained:
        pretrained_backbone = False
    backbone = resnet_fpn_backbone('resnet50', pretrained_backbone)
    return FasterRCNN(backbone, num_classes)


torch.manual_seed(0)
model = fasterrcnn_resnet50_fpn(pretrained=False, num_classes=4, pretrained_backbone=False)
frozen = [n for n, p in model.backbone.named_parameters() if not p.requires_grad]
print("frozen backbone tensors", len(frozen), "of", len(list(model.backbone.parameters())))
conv1_init = model.backbone.conv1.weight.detach().clone()
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9)
images = torch.randn(32, 3, 16, 16)
labels = (images[:, 0, :4, :4].mean((1, 2)) > 0).long() + 2 * (images[:, 1, 4:8, 4:8].mean((1, 2)) > 0).long()
for step in range(40):
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("conv1 moved", (model.backbone.conv1.weight.detach() - conv1_init).abs().max().item(), "loss", loss.item())
