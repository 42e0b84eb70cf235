"""pytorch-semseg's PSPNet after the fix: the one `nn.Dropout2d(p=0.1, inplace=False)` is still shared by the auxiliary and the main branch and still follows the `conv2DBatchNormRelu` blocks with their in-place ReLUs, but it writes a new tensor, so the ReLU outputs saved for the backward are left intact and the auxiliary-loss training runs.

source: https://github.com/VishnuDuttSharma/pytorch-semseg/commit/60a096ee4b32672f4459f5fa656431c7b1f9d1d0
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class conv2DBatchNormRelu(nn.Module):
    def __init__(self, in_channels, n_filters, k_size, stride, padding, bias=True):
        super().__init__()
        self.cbr_unit = nn.Sequential(
            nn.Conv2d(in_channels, n_filters, k_size, stride, padding, bias=bias),
            nn.BatchNorm2d(n_filters),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.cbr_unit(x)


class pyramidPooling(nn.Module):
    def __init__(self, in_channels, pool_sizes):
        super().__init__()
        self.paths = nn.ModuleList(
            [conv2DBatchNormRelu(in_channels, in_channels // len(pool_sizes), 1, 1, 0, False) for _ in pool_sizes])
        self.pool_sizes = pool_sizes

    def forward(self, x):
        h, w = x.shape[2:]
        out = [x]
        for module, size in zip(self.paths, self.pool_sizes):
            y = module(F.adaptive_avg_pool2d(x, size))
            out.append(F.interpolate(y, size=(h, w), mode="bilinear", align_corners=True))
        return torch.cat(out, dim=1)


class pspnet(nn.Module):
    def __init__(self, n_classes=5):
        super().__init__()
        self.convbnrelu1 = conv2DBatchNormRelu(3, 16, 3, 2, 1, False)
        self.res_block3 = conv2DBatchNormRelu(16, 32, 3, 1, 1, False)
        self.res_block4 = conv2DBatchNormRelu(32, 32, 3, 1, 1, False)
        self.pyramid_pooling = pyramidPooling(32, [1, 2, 4, 8])
        self.cbr_final = conv2DBatchNormRelu(64, 32, 3, 1, 1, False)
        self.dropout = nn.Dropout2d(p=0.1, inplace=False)
        self.classification = nn.Conv2d(32, n_classes, 1, 1, 0)
        self.convbnrelu4_aux = conv2DBatchNormRelu(32, 16, 3, 1, 1, False)
        self.aux_cls = nn.Conv2d(16, n_classes, 1, 1, 0)

    def forward(self, x):
        inp_shape = x.shape[2:]
        x = self.res_block3(self.convbnrelu1(x))
        if self.training:
            x_aux = self.convbnrelu4_aux(x)
            x_aux = self.dropout(x_aux)
            x_aux = self.aux_cls(x_aux)
        x = self.res_block4(x)
        x = self.pyramid_pooling(x)
        x = self.cbr_final(x)
        x = self.dropout(x)
        x = self.classification(x)
        x = F.interpolate(x, size=inp_shape, mode="bilinear", align_corners=True)
        if self.training:
            return F.interpolate(x_aux, size=inp_shape, mode="bilinear", align_corners=True), x
        return x


def multi_scale_cross_entropy(outputs, target, weights=(0.4, 1.0)):
    return sum(w * F.cross_entropy(o, target) for w, o in zip(weights, outputs))


def train(model, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.99)
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        images = torch.randn(2, 3, 32, 32, generator=g)
        labels = torch.randint(0, 5, (2, 32, 32), generator=g)
        model.train()
        loss = multi_scale_cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


train(pspnet())
