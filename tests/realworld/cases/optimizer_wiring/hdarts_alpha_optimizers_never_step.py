"""A hierarchical DARTS search keeps one Adam optimizer per level for that level's architecture weights (alpha); the bilevel step in `train` zeroes each level's alpha optimizer, computes the validation loss and calls `backward()`, then moves on to the weight step without ever calling the alpha optimizer's `step()`: the architecture weights get gradients every batch but never change, so the search returns its random initial architecture, silently.

source: https://github.com/sjoshi804/hierarchical-darts-neural-architecture-search/commit/002d51f9fe780aef7f6c656e171a1a7f2655ef3c
kind: bug
symptom: silent
verified: after 2 epochs the alphas of both levels are unchanged (max abs change 0 and 0) although their gradient norm at the last step is 0.081; the look-alike moves them by 0.118 and 0.105
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class MixedOperation(nn.Module):
    def __init__(self, ops):
        super().__init__()
        self.ops = nn.ModuleList(ops)

    def forward(self, x, alpha):
        weights = F.softmax(alpha, dim=-1)
        return sum(w * op(x) for w, op in zip(weights, self.ops))


def primitive_ops(dim):
    return [nn.Identity(), nn.Sequential(nn.Linear(dim, dim), nn.ReLU()), nn.Sequential(nn.Linear(dim, dim), nn.Tanh())]


class ModelController(nn.Module):
    def __init__(self, dim=8, classes=3, num_levels=2, num_ops=3):
        super().__init__()
        self.num_levels = num_levels
        self.alpha = nn.ParameterList(nn.Parameter(1e-3 * torch.randn(num_ops)) for _ in range(num_levels))
        self.stem = nn.Linear(4, dim)
        self.cells = nn.ModuleList(MixedOperation(primitive_ops(dim)) for _ in range(num_levels))
        self.classifier = nn.Linear(dim, classes)

    def forward(self, x):
        h = self.stem(x)
        for level, cell in enumerate(self.cells):
            h = cell(h, self.alpha[level])
        return self.classifier(h)

    def get_weights(self):
        return [p for name, p in self.named_parameters() if not name.startswith("alpha")]


class HDARTS:
    def fit(self, train_batches, valid_batches, epochs=2):
        model = ModelController()
        w_optim = torch.optim.SGD(model.get_weights(), lr=0.05, momentum=0.9)
        alpha_optim = [torch.optim.Adam([model.alpha[level]], lr=3e-3) for level in range(model.num_levels)]
        start = [a.detach().clone() for a in model.alpha]
        for epoch in range(epochs):
            self.train(train_batches, valid_batches, model, w_optim, alpha_optim)
        return model, start

    def train(self, train_batches, valid_batches, model, w_optim, alpha_optim):
        for (trn_x, trn_y), (val_x, val_y) in zip(train_batches, valid_batches):
            for level in range(model.num_levels):
                alpha_optim[level].zero_grad()
                loss = F.cross_entropy(model(val_x), val_y)
                loss.backward()  # ROOT
            self.last_alpha_grad = torch.cat([a.grad for a in model.alpha]).norm().item()
            w_optim.zero_grad()
            loss = F.cross_entropy(model(trn_x), trn_y)
            loss.backward()
            nn.utils.clip_grad_norm_(model.get_weights(), 5.0)
            w_optim.step()


def batches(n):
    out = []
    for _ in range(n):
        x = torch.randn(16, 4)
        out.append((x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()))
    return out


search = HDARTS()
model, start = search.fit(batches(20), batches(20))
changes = [f"{(a.detach() - s).abs().max().item():.3g}" for a, s in zip(model.alpha, start)]
print(f"alpha max abs change per level: {', '.join(changes)} (alpha gradient norm at the last step {search.last_alpha_grad:.3f})")
