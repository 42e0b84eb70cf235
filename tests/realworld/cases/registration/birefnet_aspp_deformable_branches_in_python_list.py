"""BiRefNet's ASPPDeformable (the squeeze block its config selects) keeps its parallel 3x3 deformable branches in a plain Python list `self.aspp_deforms`: the forward uses them, but they are not submodules, so `model.parameters()` (the optimizer), `.to(device)`, `state_dict()` and `model.train()/eval()` never see them; the branches' convolutions stay at their random init while the rest of the network trains.

source: https://github.com/ZhengPeng7/BiRefNet/commit/acab3872d9aee67b80ae8745c810ffaab7b56677
kind: bug
symptom: silent
verified: after 10 AdamW steps the deformable branch's regular_conv weight is bit-for-bit unchanged while aspp1 moved; its parameters are missing from model.parameters() and state_dict()
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Config:
    def __init__(self):
        self.squeeze_block = ['ResBlk', 'ASPP', 'ASPPDeformable'][-1]


config = Config()


class DeformableConv2d(nn.Module):
    """Stands in for BiRefNet's DeformableConv2d: the modulator and regular convolutions (the offsets, which
    torchvision's deform_conv2d applies, are left out)."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=False):
        super().__init__()
        self.padding = padding
        self.modulator_conv = nn.Conv2d(in_channels, 1, kernel_size=kernel_size, stride=stride, padding=padding, bias=True)
        nn.init.constant_(self.modulator_conv.weight, 0.)
        nn.init.constant_(self.modulator_conv.bias, 0.)
        self.regular_conv = nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride, padding=padding, bias=bias)

    def forward(self, x):
        modulator = 2. * torch.sigmoid(self.modulator_conv(x))
        return self.regular_conv(x) * modulator


class _ASPPModuleDeformable(nn.Module):
    def __init__(self, in_channels, planes, kernel_size, padding):
        super().__init__()
        self.atrous_conv = DeformableConv2d(in_channels, planes, kernel_size=kernel_size, stride=1, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.atrous_conv(x)))


class ASPPDeformable(nn.Module):
    def __init__(self, in_channels, out_channels, num_parallel_block=1):
        super().__init__()
        self.down_scale = 1
        self.in_channelster = 32 // self.down_scale

        self.aspp1 = _ASPPModuleDeformable(in_channels, self.in_channelster, 1, padding=0)
        self.aspp_deforms = [_ASPPModuleDeformable(in_channels, self.in_channelster, 3, padding=1) for _ in range(num_parallel_block)]  # ROOT

        self.global_avg_pool = nn.Sequential(nn.AdaptiveAvgPool2d((1, 1)),
                                             nn.Conv2d(in_channels, self.in_channelster, 1, stride=1, bias=False),
                                             nn.BatchNorm2d(self.in_channelster),
                                             nn.ReLU(inplace=True))
        self.conv1 = nn.Conv2d(self.in_channelster * (2 + len(self.aspp_deforms)), out_channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        x1 = self.aspp1(x)
        x_aspp_deforms = [aspp_deform(x) for aspp_deform in self.aspp_deforms]
        x5 = self.global_avg_pool(x)
        x5 = F.interpolate(x5, size=x1.size()[2:], mode='bilinear', align_corners=True)
        x = torch.cat((x1, *x_aspp_deforms, x5), dim=1)
        x = self.relu(self.bn1(self.conv1(x)))
        return self.dropout(x)


class BiRefNetLike(nn.Module):
    def __init__(self, channels=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, channels, 3, stride=2, padding=1), nn.ReLU())
        if config.squeeze_block == 'ASPPDeformable':
            self.squeeze_module = ASPPDeformable(in_channels=channels, out_channels=channels)
        else:
            self.squeeze_module = nn.Identity()
        self.head = nn.Conv2d(channels, 1, 1)

    def forward(self, x):
        x = self.squeeze_module(self.encoder(x))
        return F.interpolate(self.head(x), scale_factor=2, mode='bilinear', align_corners=True)


model = BiRefNetLike()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
branch = model.squeeze_module.aspp_deforms[0].atrous_conv.regular_conv.weight
branch_before = branch.detach().clone()
aspp1_before = model.squeeze_module.aspp1.atrous_conv.regular_conv.weight.detach().clone()
model.train()
for step in range(10):
    images = torch.randn(2, 3, 32, 32)
    gts = (torch.rand(2, 1, 32, 32) > 0.5).float()
    loss = F.binary_cross_entropy_with_logits(model(images), gts)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

in_params = any(p is branch for p in model.parameters())
print(f"loss {loss.item():.4f}; deformable branch moved {(branch - branch_before).abs().max().item():.6f}; "
      f"aspp1 moved {(model.squeeze_module.aspp1.atrous_conv.regular_conv.weight - aspp1_before).abs().max().item():.6f}; "
      f"branch in model.parameters(): {in_params}; state_dict keys with 'aspp_deforms': "
      f"{sum('aspp_deforms' in k for k in model.state_dict())}")
