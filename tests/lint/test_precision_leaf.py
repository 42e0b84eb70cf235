"""Real-world shapes that look like GT3xx/GT4xx bugs but are correct: all must stay silent.

Written fresh after patterns seen in transformers, timm, torchvision, lightning, diffusers,
fairseq and common training scripts (adversarial attacks, EMA, fine-tuning, prefix tuning).
"""
from __future__ import annotations

import ast
import textwrap

import pytest

from gradtrace.lint import check_source

SHAPES = {
    "pgd-attack-releafs-each-step": """
        import torch
        import torch.nn.functional as F
        def pgd(model, x, y, eps=8 / 255, alpha=2 / 255, steps=10):
            x_adv = x.clone().detach()
            for _ in range(steps):
                x_adv.requires_grad_(True)
                loss = F.cross_entropy(model(x_adv), y)
                loss.backward()
                x_adv = x_adv + alpha * x_adv.grad.sign()
                x_adv = torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0, 1).detach()
            return x_adv
    """,
    "fgsm-single-step": """
        import torch
        def fgsm(model, image, label, eps):
            image.requires_grad = True
            torch.nn.functional.nll_loss(model(image), label).backward()
            image = image + eps * image.grad.sign()
            return torch.clamp(image, 0, 1)
    """,
    "manual-sgd-under-no-grad-then-releaf": """
        import torch
        w = torch.randn(5, requires_grad=True)
        for step in range(100):
            loss = (w ** 2).sum()
            loss.backward()
            with torch.no_grad():
                w = w - 0.1 * w.grad
            w.requires_grad_()
    """,
    "maml-functional-fast-weights": """
        import torch
        def inner_loop(model, params, x, y, lr):
            for _ in range(5):
                loss = torch.nn.functional.mse_loss(torch.func.functional_call(model, params, x), y)
                grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
                params = {k: p - lr * g for (k, p), g in zip(params.items(), grads)}
            return params
    """,
    "ema-update-decorated": """
        import torch
        class EMA:
            def __init__(self, model, decay=0.999):
                self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}
                self.decay = decay
            @torch.no_grad()
            def update(self, model):
                for p_ema, p in zip(self.ema.parameters(), model.parameters()):
                    p_ema.mul_(self.decay).add_(p, alpha=1 - self.decay)
    """,
    "init-weights-with-data-and-nn-init": """
        import math
        import torch
        import torch.nn as nn
        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.qkv = nn.Linear(dim, dim * 3)
                self.rel_bias = nn.Parameter(torch.zeros(16, 16))
                self.scale = nn.Parameter(torch.ones(dim) * 1e-5)
                nn.init.trunc_normal_(self.rel_bias, std=0.02)
                self.qkv.weight.data.normal_(0, math.sqrt(2.0 / dim))
                self.qkv.bias.data.zero_()
    """,
    "clip-weights-wgan": """
        import torch
        def train_critic(critic, opt, real, fake):
            loss = critic(fake).mean() - critic(real).mean()
            loss.backward()
            opt.step()
            for p in critic.parameters():
                p.data.clamp_(-0.01, 0.01)
    """,
    "saliency-on-input": """
        import torch
        def saliency(model, x, target):
            x = x.clone().requires_grad_()
            out = model(x)
            out[0, target].backward()
            return x.grad.abs().max(dim=1)[0]
    """,
    "retain-grad-on-activation": """
        import torch
        import torch.nn as nn
        def inspect():
            net = nn.Linear(4, 4)
            h = net(torch.randn(2, 4))
            h.retain_grad()
            h.sum().backward()
            return h.grad
    """,
    "detach-target-features": """
        import torch
        import torch.nn as nn
        def content_target(cnn, img):
            target = cnn(img).detach()
            target.requires_grad = False
            return target
    """,
    "layers-wrapped-later": """
        import torch.nn as nn
        class Encoder(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                blocks = []
                for _ in range(n):
                    blocks.append(nn.TransformerEncoderLayer(d, 4))
                self.blocks = nn.ModuleList(blocks)
                self.stages = [nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3)]
                self.body = nn.Sequential(*self.stages)
                self.norms = []
                for i in range(n):
                    norm = nn.LayerNorm(d)
                    self.add_module(f"norm{i}", norm)
                    self.norms.append(norm)
    """,
    "plain-lists-of-non-modules": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        class Head(nn.Module):
            def __init__(self, dims):
                super().__init__()
                self.dims = [int(d) for d in dims]
                self.acts = [F.relu, F.gelu, nn.ReLU(), nn.Dropout(0.1)]
                self.names = {"cls": 0, "box": 1}
                self.anchor_grids = [torch.zeros(1)] * 3
                self.strides = (8, 16, 32)
                self.proj = nn.Linear(dims[0], dims[-1])
                self.order = [self.proj]
                self.register_buffer("freqs", torch.arange(16).float())
    """,
    "non-module-container-class": """
        import torch.nn as nn
        class ModelZoo:
            def __init__(self):
                self.models = [nn.Linear(4, 4), nn.Conv2d(3, 3, 1)]
                self.heads = {"a": nn.Linear(2, 2)}
    """,
    "to-device-and-wrappers-after-optimizer": """
        import torch
        import torch.nn as nn
        def main(args):
            model = Net()
            optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
            model = model.to(args.device)
            model = nn.DataParallel(model.cuda())
            model = torch.compile(model)
            model.load_state_dict(torch.load(args.ckpt))
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            model = Net()
            model.load_state_dict(torch.load("best.pt"))
            evaluate(model)
    """,
    "head-replaced-before-optimizer": """
        import torch
        import torchvision
        model = torchvision.models.resnet18(weights="DEFAULT")
        model.fc = torch.nn.Linear(512, 3)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    """,
    "optimizer-rebuilt-after-unfreeze": """
        import torch
        model.backbone.requires_grad_(False)
        opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()))
        for epoch in range(20):
            if epoch == 10:
                model.backbone.requires_grad_(True)
                opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
            train(model, opt)
            opt.step()
    """,
    "prefix-tuning-freezes-self": """
        import torch
        import torch.nn as nn
        class PrefixModel(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4), 2)
                self.head = nn.Linear(64, 2)
                if config.prefix:
                    for p in self.parameters():
                        p.requires_grad = False
                    self.prefix = nn.Embedding(10, 64)
    """,
    "gan-two-optimizers-right": """
        import torch
        def train(G, D, loader):
            opt_G = torch.optim.Adam(G.parameters(), lr=2e-4)
            opt_D = torch.optim.Adam(D.parameters(), lr=2e-4)
            for real in loader:
                opt_D.zero_grad(); D(real).mean().backward(); opt_D.step()
                opt_G.zero_grad(); D(G(real)).mean().backward(); opt_G.step()
    """,
    "parameters-listed-once": """
        import torch
        def build(model):
            params = list(model.parameters())
            print(sum(p.numel() for p in params))
            decay = [p for p in params if p.ndim > 1]
            return torch.optim.AdamW(params, lr=1e-3)
    """,
    "parameter-of-frozen-pretrained-kept-frozen": """
        import torch
        import torch.nn as nn
        def load(model, vectors):
            vectors.requires_grad = False
            model.embed.weight = nn.Parameter(vectors, requires_grad=False)
            model.requires_grad_(False)
            model.head.weight = nn.Parameter(torch.zeros(3, 4))
            model.head.requires_grad_(True)
    """,
    "float-requires-grad-tensors": """
        import torch
        a = torch.tensor([1.0, 2, 3], requires_grad=True)
        b = torch.arange(0, 10, 0.5, requires_grad=True)
        c = torch.full((3,), 0.5, requires_grad=True)
        d = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        e = torch.tensor([1, 2, 3], dtype=torch.float32, requires_grad=True)
        f = torch.arange(5).float().requires_grad_()
    """,
    # torch 2.13 `export/pt2_archive/_package.py`: the flag set in one branch belongs to the
    # tensor of that branch; the other branch fills a fresh tensor with `set_` before the flag
    "flag-set-on-the-other-branchs-tensor": """
        import torch
        def load(meta, raw, nbytes):
            if nbytes == 0:
                tensor = torch.zeros(3)
                if meta.requires_grad:
                    tensor.requires_grad_(True)
            else:
                tensor = torch.empty(0)
                tensor.set_(raw.untyped_storage(), 0, (3,), (1,))
                if meta.requires_grad:
                    tensor.requires_grad_(True)
            return tensor
    """,
    "module-flag-attribute-of-own-class": """
        import torch.nn as nn
        class Adapter(nn.Module):
            def __init__(self, trainable=True):
                super().__init__()
                self.requires_grad = trainable
                self.proj = nn.Linear(4, 4)
                self.proj.weight.requires_grad = trainable
    """,
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_is_silent(name: str, monkeypatch) -> None:
    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    src = textwrap.dedent(SHAPES[name]).strip() + "\n"
    ast.parse(src)  # a shape that does not parse would pass vacuously
    found = [(f.code, f.line, f.message) for f in check_source(src, f"{name}.py",
                                                               select=["GT3", "GT4"])]
    assert found == []


def test_shapes_have_bad_twins() -> None:
    """The rules are live on the bad twin of a few shapes (so silence above means something)."""
    bad = textwrap.dedent("""
        import torch
        import torchvision
        w = torch.randn(5, requires_grad=True)
        for step in range(100):
            (w ** 2).sum().backward()
            w = w - 0.1 * w.grad
        model = torchvision.models.resnet18()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        model.fc = torch.nn.Linear(512, 3)
        opt.step()
        a = torch.tensor([1, 2, 3], requires_grad=True)
        t = torch.empty(0)
        t.requires_grad_(True)
        t.set_(storage, 0, (3,), (1,))
    """).strip() + "\n"
    codes = sorted((f.code, f.line) for f in check_source(bad, "bad.py", select=["GT3", "GT4"]))
    assert codes == [("GT301", 6), ("GT302", 14), ("GT304", 11), ("GT404", 9)]


def test_frozen_batchnorm_copy_is_silent() -> None:
    """A local module class may keep weight/bias as buffers (frozen BN): copy_ is fine."""
    src = textwrap.dedent("""
        import torch
        import torch.nn as nn
        class FrozenBN(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("weight", torch.ones(n))
                self.register_buffer("bias", torch.zeros(n))
        def swap_bn(model):
            for name, module in model.named_children():
                if isinstance(module, nn.BatchNorm2d):
                    new = FrozenBN(module.num_features)
                    new.weight.copy_(module.weight)
                    new.bias.copy_(module.bias)
                    model._modules[name] = new
    """).strip() + "\n"
    ast.parse(src)
    assert check_source(src, "bn.py", select=["GT3", "GT4"]) == []


def test_two_optimizers_over_disjoint_parts_are_silent() -> None:
    src = textwrap.dedent("""
        import torch
        def train(model, loader):
            enc = [p for n, p in model.named_parameters() if n.startswith("encoder")]
            dec = [p for n, p in model.named_parameters() if n.startswith("decoder")]
            opt_enc = torch.optim.Adam(enc, lr=1e-4)
            opt_dec = torch.optim.Adam(dec, lr=1e-3)
            for x, y in loader:
                model(x).sum().backward()
                opt_enc.step()
                opt_dec.step()
    """).strip() + "\n"
    ast.parse(src)
    assert check_source(src, "two.py", select=["GT3", "GT4"]) == []
