"""hand-gesture-recognition's HRNet keypoint model builds, in `StageModule.__init__`, the branches and then the fuse layers (the convolutions that resample each branch to the others' resolution and add them up). The branches are wrapped in `nn.ModuleList`, but the fuse layers stay in a plain Python list (of ModuleLists): `nn.Module` does not register modules held in a list, so none of the fuse convolutions or BatchNorms is in `model.parameters()`, in the optimizer or in the state dict. Training runs and the loss falls, but every cross-resolution fusion keeps its random initial weights.

source: https://github.com/yingkunwu/hand-gesture-recognition/commit/be896ba2363053db79f971a876d1e5579645f784
kind: bug
symptom: silent
verified: the optimizer holds 20 tensors against 26 in the look-alike, and after 30 steps the fuse convolutions have moved by 0.0 (max absolute change) while a branch convolution moved by 0.16; in the look-alike the fuse convolutions move by 0.20
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class BasicBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + x)


class StageModule(nn.Module):
    def __init__(self, stage, output_branches, c):
        super().__init__()
        self.stage = stage
        self.branches = nn.ModuleList([BasicBlock(c * 2 ** i) for i in range(stage)])

        self.fuse_layers = []  # ROOT
        for i in range(output_branches):
            fuse_layer = []
            for j in range(stage):
                if i == j:
                    fuse_layer.append(None)
                elif j > i:  # upsample the lower-resolution branch
                    fuse_layer.append(nn.Sequential(
                        nn.Conv2d(c * 2 ** j, c * 2 ** i, 1, bias=False), nn.BatchNorm2d(c * 2 ** i)))
                else:  # downsample the higher-resolution branch
                    fuse_layer.append(nn.Sequential(
                        nn.Conv2d(c * 2 ** j, c * 2 ** i, 3, stride=2, padding=1, bias=False),
                        nn.BatchNorm2d(c * 2 ** i)))
            self.fuse_layers.append(nn.ModuleList(fuse_layer))

    def forward(self, x):
        x = [branch(xi) for branch, xi in zip(self.branches, x)]
        fused = []
        for i in range(len(self.fuse_layers)):
            y = x[i]
            for j in range(self.stage):
                if j > i:
                    y = y + F.interpolate(self.fuse_layers[i][j](x[j]), size=x[i].shape[-2:],
                                          mode="bilinear", align_corners=True)
                elif j < i:
                    y = y + self.fuse_layers[i][j](x[j])
            fused.append(F.relu(y))
        return fused


class HRNet(nn.Module):
    def __init__(self, c=8, nof_joints=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(c), nn.ReLU())
        self.transition = nn.Sequential(nn.Conv2d(c, 2 * c, 3, stride=2, padding=1, bias=False),
                                        nn.BatchNorm2d(2 * c), nn.ReLU())
        self.stage2 = StageModule(stage=2, output_branches=2, c=c)
        self.final_layer = nn.Conv2d(c, nof_joints, 1)

    def forward(self, x):
        x = self.stem(x)
        x = self.stage2([x, self.transition(x)])
        return self.final_layer(x[0])


def heatmaps(points, size=16):
    grid = torch.arange(size).float()
    gy = torch.exp(-(grid[None, :, None] - points[..., 1:2, None]) ** 2 / 4)
    gx = torch.exp(-(grid[None, None, :] - points[..., 0:1, None]) ** 2 / 4)
    return gy * gx


def train(model, steps=30):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    print("tensors in the optimizer:", sum(len(g["params"]) for g in optimizer.param_groups))
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        images = torch.randn(4, 3, 32, 32, generator=g)
        points = torch.randint(2, 14, (4, 5, 2), generator=g).float()
        target = heatmaps(points.view(-1, 2)).view(4, 5, 16, 16)
        loss = F.mse_loss(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


model = HRNet()
fuse_before = [layer[0].weight.detach().clone() for row in model.stage2.fuse_layers for layer in row if layer is not None]
branch_before = model.stage2.branches[1].conv1.weight.detach().clone()
train(model)
fuse_after = [layer[0].weight.detach() for row in model.stage2.fuse_layers for layer in row if layer is not None]
print("fuse convolutions moved by:", max((a - b).abs().max().item() for a, b in zip(fuse_after, fuse_before)))
print("branch convolution moved by:", (model.stage2.branches[1].conv1.weight.detach() - branch_before).abs().max().item())
