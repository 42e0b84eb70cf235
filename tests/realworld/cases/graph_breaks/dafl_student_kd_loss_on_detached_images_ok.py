"""DAFL's data-free distillation loop after its fix: the student's KD loss is computed on `gen_imgs.detach()`, so the one summed `backward()` gives the generator only the gradients of its own teacher-driven losses (one-hot, information entropy, activation) and the student only the KD gradient.

source: https://github.com/huawei-noah/Efficient-Computing/commit/f5ad6114b5896b918dc5923c99575275ecad41dc
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)

latent_dim, img_size, channels, batch_size = 32, 8, 1, 64
oh_w, ie_w, a_w = 1.0, 5.0, 0.1


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.init_size = img_size // 4
        self.l1 = nn.Sequential(nn.Linear(latent_dim, 32 * self.init_size ** 2))
        self.conv_blocks0 = nn.Sequential(nn.BatchNorm2d(32))
        self.conv_blocks1 = nn.Sequential(nn.Conv2d(32, 32, 3, stride=1, padding=1), nn.BatchNorm2d(32, 0.8),
                                          nn.LeakyReLU(0.2, inplace=True))
        self.conv_blocks2 = nn.Sequential(nn.Conv2d(32, 16, 3, stride=1, padding=1), nn.BatchNorm2d(16, 0.8),
                                          nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(16, channels, 3, stride=1, padding=1),
                                          nn.Tanh(), nn.BatchNorm2d(channels, affine=False))

    def forward(self, z):
        out = self.l1(z).view(z.shape[0], 32, self.init_size, self.init_size)
        img = F.interpolate(self.conv_blocks0(out), scale_factor=2)
        img = F.interpolate(self.conv_blocks1(img), scale_factor=2)
        return self.conv_blocks2(img)


class LeNetSmall(nn.Module):
    def __init__(self, width=8, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten())
        self.fc = nn.Linear(2 * width, num_classes)

    def forward(self, x, out_feature=False):
        feature = self.features(x)
        out = self.fc(feature)
        return (out, feature) if out_feature else out


def kdloss(y, teacher_scores):
    p = F.log_softmax(y, dim=1)
    q = F.softmax(teacher_scores, dim=1)
    return F.kl_div(p, q, reduction="sum") / y.shape[0]


generator = Generator()
teacher = LeNetSmall(width=16)  # stands in for the pretrained teacher loaded from disk
teacher.eval()
net = LeNetSmall(width=8)
criterion = nn.CrossEntropyLoss()
optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.02)
optimizer_S = torch.optim.Adam(net.parameters(), lr=2e-3)

for i in range(20):
    net.train()
    z = torch.randn(batch_size, latent_dim)
    optimizer_G.zero_grad()
    optimizer_S.zero_grad()
    gen_imgs = generator(z)
    outputs_T, features_T = teacher(gen_imgs, out_feature=True)
    pred = outputs_T.data.max(1)[1]
    loss_activation = -features_T.abs().mean()
    loss_one_hot = criterion(outputs_T, pred)
    softmax_o_T = F.softmax(outputs_T, dim=1).mean(dim=0)
    loss_information_entropy = (softmax_o_T * torch.log10(softmax_o_T)).sum()
    loss = loss_one_hot * oh_w + loss_information_entropy * ie_w + loss_activation * a_w
    loss_kd = kdloss(net(gen_imgs.detach()), outputs_T.detach())
    if i == 0:  # measurement only: where each term's gradient lands on the generator
        g_params = list(generator.parameters())
        kd_grads = torch.autograd.grad(loss_kd, g_params, retain_graph=True, allow_unused=True)
        own_grads = torch.autograd.grad(loss, g_params, retain_graph=True, allow_unused=True)
        norm = lambda gs: sum(float(g.norm() ** 2) for g in gs if g is not None) ** 0.5
        print(f"KD loss gradient norm on the generator: {norm(kd_grads):.4g}; "
              f"generator losses' gradient norm: {norm(own_grads):.4g}")
    loss += loss_kd
    loss.backward()
    optimizer_G.step()
    optimizer_S.step()
    if i % 5 == 0:
        print(f"[{i}] loss_oh {loss_one_hot.item():.3f} loss_ie {loss_information_entropy.item():.3f} "
              f"loss_a {loss_activation.item():.3f} loss_kd {loss_kd.item():.3f}")
