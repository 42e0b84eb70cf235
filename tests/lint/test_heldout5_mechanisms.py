"""Mechanisms behind held-out misses of session 9 (docs/triage/heldout5.md), each in spellings
other than the case it came from, run on real torch.

Same harness as test_heldout_shapes.py: a look-alike that must stay silent and run, buggy twins
(two or more spellings) that must be reported on the given line and really fail on torch (any
exception whose message matches), or show the silent symptom (``holds``).
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _source

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT708: an out-of-place method only tensors have, as a statement, on a value the scope
    # cannot place (built through a generator, a helper of another file)
    "tensor-only-op-result-dropped": (Shape("""
        class Attend(nn.Module):
            def __init__(self):
                super().__init__()
                self.qk = nn.Linear(4, 8)

            def forward(self, x, pad):
                q, k = (t.unsqueeze(1) for t in self.qk(x).chunk(2, dim=-1))
                scores = q @ k.transpose(-1, -2)
                scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
                return scores.softmax(-1)

        pad = torch.tensor([[False, True, True]])
        out = Attend()(torch.randn(1, 3, 4), pad)
        """, "GT708", holds="float(out[..., 1:].detach().abs().max()) == 0.0"), [Shape("""
        class Attend(nn.Module):
            def __init__(self):
                super().__init__()
                self.qk = nn.Linear(4, 8)

            def forward(self, x, pad):
                q, k = (t.unsqueeze(1) for t in self.qk(x).chunk(2, dim=-1))
                scores = q @ k.transpose(-1, -2)
                scores.masked_fill(pad[:, None, None, :], float("-inf"))
                return scores.softmax(-1)

        pad = torch.tensor([[False, True, True]])
        out = Attend()(torch.randn(1, 3, 4), pad)
        """, "GT708", 9, holds="float(out[..., 1:].detach().abs().max()) > 0.0"), Shape("""
        def safe_ratio(pairs):
            num, den = (t.float() for t in pairs)
            r = num / den
            r.nan_to_num(0.0)
            return r

        r = safe_ratio((torch.tensor([0.0, 1.0]), torch.tensor([0.0, 2.0])))
        """, "GT708", 4, holds="bool(torch.isnan(r).any())")]),
    # GT524: gradients clipped between the scaled backward and the scaler's step, without
    # `unscale_` (Pytorch-UNet#468): the clip reads gradients multiplied by the loss scale
    "clip-before-unscale": (Shape("""
        from torch.nn.utils import clip_grad_norm_

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.scaler = torch.amp.GradScaler("cpu")

            def train_step(self, x, y):
                self.opt.zero_grad()
                loss = F.mse_loss(self.model(x), y)
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.opt)
                clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.opt)
                self.scaler.update()

        net = nn.Linear(4, 1)
        before = net.weight.detach().clone()
        Trainer(net).train_step(torch.randn(8, 4), torch.randn(8, 1) * 10)
        """, "GT524", holds="float((net.weight.detach() - before).norm()) > 1e-2"), [Shape("""
        from torch.nn.utils import clip_grad_norm_

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.scaler = torch.amp.GradScaler("cpu")

            def train_step(self, x, y, clip=1.0):
                self.opt.zero_grad()
                loss = F.mse_loss(self.model(x), y)
                self.scaler.scale(loss).backward()
                if clip:
                    clip_grad_norm_(self.model.parameters(), clip)
                self.scaler.step(self.opt)
                self.scaler.update()

        net = nn.Linear(4, 1)
        before = net.weight.detach().clone()
        Trainer(net).train_step(torch.randn(8, 4), torch.randn(8, 1) * 10)
        """, "GT524", 14, holds="float((net.weight.detach() - before).norm()) < 1e-4"), Shape("""
        def fit(model, batches, opt, amp_scaler):
            for x, y in batches:
                opt.zero_grad()
                amp_scaler.scale(F.mse_loss(model(x), y)).backward()
                nn.utils.clip_grad_value_(model.parameters(), 0.5)
                amp_scaler.step(opt)
                amp_scaler.update()

        net = nn.Linear(4, 1)
        before = net.weight.detach().clone()
        fit(net, [(torch.randn(8, 4), torch.randn(8, 1) * 10)],
            torch.optim.SGD(net.parameters(), lr=0.1), torch.amp.GradScaler("cpu"))
        """, "GT524", 5, holds="float((net.weight.detach() - before).norm()) < 1e-4")]),
    # GT525: `unscale_` on every pass, `update()` only in one arm of an `if` that can differ
    # from pass to pass (espnet#2362): the next `unscale_` raises
    "scaler-update-skipped": (Shape("""
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        batches = [torch.tensor([[float("inf"), 1.0]]), torch.randn(1, 2), torch.randn(1, 2)]
        for x in batches:
            opt.zero_grad()
            scaler.scale(net(x).sum()).backward()
            scaler.unscale_(opt)
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            if torch.isfinite(norm):
                scaler.step(opt)
            scaler.update()
        """, "GT525"), [Shape("""
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        batches = [torch.tensor([[float("inf"), 1.0]]), torch.randn(1, 2), torch.randn(1, 2)]
        for x in batches:
            opt.zero_grad()
            scaler.scale(net(x).sum()).backward()
            scaler.unscale_(opt)
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            if not torch.isfinite(norm):
                print("skipping a non-finite step")
            else:
                scaler.step(opt)
                scaler.update()
        """, "GT525", 14, "unscale_\\(\\) has already been called"), Shape("""
        def train(net, opt, scaler, batches, accum=2):
            for i, x in enumerate(batches):
                scaler.scale(net(x).sum() / accum).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                if (i + 1) % accum == 0:
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad()

        net = nn.Linear(2, 1)
        train(net, torch.optim.SGD(net.parameters(), lr=0.1), torch.amp.GradScaler("cpu"),
              [torch.randn(1, 2) for _ in range(4)])
        """, "GT525", 8, "unscale_\\(\\) has already been called")]),
    # GT526: a scheduler whose period counts epochs, stepped with the optimizer in the batch
    # loop (SRGAN-PyTorch#1): the learning rate decays after a few batches
    "epoch-scheduler-stepped-per-batch": (Shape("""
        EPOCHS = 4
        net = nn.Linear(4, 1)
        opt = torch.optim.SGD(net.parameters(), lr=1e-3)
        loader = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(8)]
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=EPOCHS * len(loader) // 2)
        for epoch in range(EPOCHS):
            for x, y in loader:
                opt.zero_grad()
                F.mse_loss(net(x), y).backward()
                opt.step()
                sched.step()
            if epoch == 0:
                break
        """, "GT526", holds="opt.param_groups[0]['lr'] == 1e-3"), [Shape("""
        def train(net, loader, EPOCHS=4):
            opt = torch.optim.SGD(net.parameters(), lr=1e-3)
            sched = torch.optim.lr_scheduler.MultiStepLR(
                opt, milestones=[int(0.5 * EPOCHS), int(0.75 * EPOCHS)], gamma=0.1)
            for epoch in range(EPOCHS):
                for i, (x, y) in enumerate(loader):
                    opt.zero_grad()
                    F.mse_loss(net(x), y).backward()
                    opt.step()
                    sched.step()
                return opt.param_groups[0]["lr"]

        lr = train(nn.Linear(4, 1), [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(8)])
        """, "GT526", 10, holds="lr < 1e-4"), Shape("""
        class Trainer:
            def __init__(self, net, n_rounds):
                self.net, self.n_rounds = net, n_rounds
                self.opt = torch.optim.Adam(net.parameters(), lr=1e-3)
                self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(
                    self.opt, T_max=n_rounds)

            def fit(self, loader):
                for _ in range(self.n_rounds):
                    for x, y in loader:
                        self.opt.zero_grad()
                        F.mse_loss(self.net(x), y).backward()
                        self.opt.step()
                        self.sched.step()
                    return self.opt.param_groups[0]["lr"]

        lr = Trainer(nn.Linear(4, 1), 4).fit(
            [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(4)])
        """, "GT526", 14, holds="lr < 1e-6")]),
    # GT607: a block that starts with an in-place activation overwrites its caller's input,
    # read again by a skip connection (vq-vae-2#60) or by other code of the caller
    # (powerful-benchmarker#78)
    "inplace-first-layer-overwrites-input": (Shape("""
        class Block(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.fc = nn.Linear(ch, ch)
                self.last = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(ch, ch))

            def forward(self, x):
                h = self.fc(x)
                return self.last(h) + x

        blk = Block(4)
        x = torch.randn(3, 4)
        x0 = x.clone()
        blk(x).sum().backward()
        """, "GT607", holds="torch.equal(x, x0) and blk.fc.weight.grad is not None"), [Shape("""
        class DenseUnit(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.body = nn.Sequential(nn.LeakyReLU(0.2, True), nn.Linear(ch, ch))

            def forward(self, x):
                return torch.cat([self.body(x), x], dim=1)

        x = torch.randn(3, 4)
        x0 = x.clone()
        out = DenseUnit(4)(x)
        """, "GT607", 4, holds="not torch.equal(out[:, 4:], x0)"), Shape("""
        class Head(nn.Module):
            def __init__(self, dims):
                super().__init__()
                layers = [nn.ReLU(inplace=True), nn.Linear(dims[0], dims[1])]
                self.mlp = nn.Sequential(*layers)

            def forward(self, feats):
                return self.mlp(feats)

        backbone, head = nn.Linear(6, 8), Head([8, 3])
        feats = backbone(torch.randn(5, 6))
        reg = feats.pow(2).mean()
        logits = head(feats)
        (F.cross_entropy(logits, torch.tensor([0, 1, 2, 0, 1])) + reg).backward()
        """, "GT607", 4, "modified by an inplace operation")]),
    # GT753: the root of an even power of a difference (a square of a square, or of a name
    # bound to a difference), also in a loss written as a parameter-free module whose
    # instance feeds backward (Zero-DCE_extension#2)
    "root-of-even-power-of-difference": (Shape("""
        class ColorLoss(nn.Module):
            def __init__(self, w=1.0):
                super().__init__()
                self.w = w

            def forward(self, img):
                r, g, b = img.mean(dim=(2, 3)).unbind(1)
                d_rg = (r - g) ** 2
                return self.w * (d_rg ** 2 + ((r - b) ** 2) ** 2 + 1e-8) ** 0.5

        net = nn.Conv2d(3, 3, 1)
        nn.init.zeros_(net.bias)
        crit = ColorLoss()
        loss = crit(net(torch.zeros(2, 3, 4, 4))).mean()
        loss.backward()
        """, "GT753", holds="bool(torch.isfinite(net.weight.grad).all())"), [Shape("""
        class ColorLoss(nn.Module):
            def __init__(self, w=1.0):
                super().__init__()
                self.w = w

            def forward(self, img):
                r, g, b = img.mean(dim=(2, 3)).unbind(1)
                d_rg = (r - g) ** 2
                return self.w * (d_rg ** 2 + ((r - b) ** 2) ** 2) ** 0.5

        net = nn.Conv2d(3, 3, 1)
        nn.init.zeros_(net.bias)
        crit = ColorLoss()
        loss = crit(net(torch.zeros(2, 3, 4, 4))).mean()
        loss.backward()
        """, "GT753", 9, holds="bool(torch.isnan(net.weight.grad).any())"), Shape("""
        pts = nn.Parameter(torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 2.0]]))
        dx = pts[:, None, 0] - pts[None, :, 0]
        dy = pts[:, None, 1] - pts[None, :, 1]
        dist = torch.pow(dx ** 2 + dy ** 2, 0.5)
        dist.sum().backward()
        """, "GT753", 4, holds="bool(torch.isnan(pts.grad).any())")]),
    # GT751: a boolean index selects like `where`: `log1p(a)[a > -1]` still differentiates
    # log1p at the elements left out (pytorch#152088)
    "singular-op-then-boolean-index": (Shape("""
        p = torch.tensor([0.0, 0.5, 0.5], requires_grad=True)
        ll = torch.log(p.clamp(min=1e-12))[p > 0].sum()
        ll.backward()
        """, "GT751", holds="bool(torch.isfinite(p.grad).all())"), [Shape("""
        def masked_log_lik(p):
            return torch.log(p)[p > 0].mean()

        p = torch.tensor([0.0, 0.5, 0.5], requires_grad=True)
        masked_log_lik(p).backward()
        """, "GT751", 2, holds="bool(torch.isnan(p.grad).any())"), Shape("""
        x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
        s = x.sqrt()[x.gt(0)]
        s.sum().backward()
        """, "GT751", 2, holds="bool(torch.isnan(x.grad).any())")]),
    # GT757: the NaN/inf a division or log makes filtered out afterwards (pytorch#22820 SMAPE)
    "nan-filtered-after-singular-op": (Shape("""
        pred = nn.Parameter(torch.tensor([0.0, 1.0, 3.0]))
        target = torch.tensor([0.0, 2.0, 3.0])
        ratio = (pred - target).abs() / (pred.abs() + target.abs()).clamp(min=1e-8)
        ratio = ratio[~torch.isnan(ratio)]
        ratio.mean().backward()
        """, "GT757", holds="bool(torch.isfinite(pred.grad).all())"), [Shape("""
        pred = nn.Parameter(torch.tensor([0.0, 1.0, 3.0]))
        target = torch.tensor([0.0, 2.0, 3.0])
        ratio = (pred - target).abs() / (pred.abs() + target.abs())
        ratio = torch.where(torch.isnan(ratio), torch.zeros_like(ratio), ratio)
        ratio.mean().backward()
        """, "GT757", 3, holds="bool(torch.isnan(pred.grad).any())"), Shape("""
        def nll(logits, picked):
            probs = logits.softmax(-1) * picked
            ll = torch.log(probs)
            ll[torch.isinf(ll)] = 0.0
            return -ll.sum()

        logits = torch.randn(2, 3, requires_grad=True)
        nll(logits, torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])).backward()
        """, "GT757", 3, holds="bool(torch.isnan(logits.grad).any())")]),
    # GT521: a layer given to the constructor, or a module class of the file, called in
    # `__init__`: every forward reuses that one graph (SoftMaskedBert#16)
    "layer-called-in-init": (Shape("""
        class Head(nn.Module):
            def __init__(self, embed, pad_id):
                super().__init__()
                self.embed = embed
                self.pad_vec = self.embed(torch.tensor([pad_id])).detach()
                self.out = nn.Linear(8, 2)

            def forward(self, ids):
                return self.out(self.embed(ids) - self.pad_vec)

        h = Head(nn.Embedding(10, 8), 0)
        for _ in range(2):
            h(torch.tensor([1, 2])).sum().backward()
        """, "GT521", holds="h.embed.weight.grad is not None"), [Shape("""
        class Head(nn.Module):
            def __init__(self, embed, pad_id):
                super().__init__()
                self.embed = embed
                self.pad_vec = self.embed(torch.tensor([pad_id]))
                self.out = nn.Linear(8, 2)

            def forward(self, ids):
                return self.out(self.embed(ids) - self.pad_vec)

        h = Head(nn.Embedding(10, 8), 0)
        for _ in range(2):
            h(torch.tensor([1, 2])).sum().backward()
        """, "GT521", 5, "backward through the graph a second time"), Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.tanh(self.fc(x))

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = Encoder()
                self.null = self.enc(torch.zeros(1, 4))
                self.head = nn.Linear(4, 1)

            def forward(self, x):
                return self.head(self.enc(x) - self.null)

        m = Model()
        for _ in range(2):
            m(torch.randn(3, 4)).sum().backward()
        """, "GT521", 13, "backward through the graph a second time")]),
}


def _run(shape: Shape) -> dict:
    env: dict = {}
    if shape.raises:
        with pytest.raises(Exception, match=shape.raises):
            exec(compile(_source(shape), "shape.py", "exec"), env)
    else:
        exec(compile(_source(shape), "shape.py", "exec"), env)
    if shape.holds:
        assert eval(shape.holds, env)
    return env


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)


def test_first_layer_replaced_before_the_sequential_is_silent() -> None:
    """timm's Xception builds `rep` with a leading in-place ReLU and then replaces it
    (`rep[0] = nn.ReLU(inplace=False)`): the block does not write its input (GT607 silent)."""
    shape = Shape("""
        class Block(nn.Module):
            def __init__(self, ch, reps=2):
                super().__init__()
                rep = []
                for _ in range(reps):
                    rep.append(nn.ReLU(inplace=True))
                    rep.append(nn.Linear(ch, ch))
                rep[0] = nn.ReLU(inplace=False)
                self.rep = nn.Sequential(*rep)

            def forward(self, inp):
                x = self.rep(inp)
                x += inp
                return x

        inp = torch.randn(3, 4)
        inp0 = inp.clone()
        Block(4)(inp).sum().backward()
        """, "GT607", holds="torch.equal(inp, inp0)")
    assert _found(shape) == []
    _run(shape)
