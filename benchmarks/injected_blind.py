"""Recall on real training scripts, blind set: bugs written by someone who did not read the rules.

The same harness as ``benchmarks/injected.py`` (its ``mutate`` and ``measure``) on other scripts
of pytorch/examples: vae, dcgan, reinforcement_learning (reinforce, actor_critic),
time_sequence_prediction, mnist_rnn, mnist_forward_forward, gcn. Each mutation is a mistake users
report in that kind of script (docs/triage/inject2.md gives the source of each). The scripts run on
made-up data: a stub ``torchvision`` (random MNIST/FakeData, identity transforms, no-op
save_image), a stub ``gymnasium`` (a small CartPole-like environment), random Cora files.

    python benchmarks/injected_blind.py --examples /tmp/examples [--only NAME] [--verify]

``--verify`` runs no gradtrace: it runs each mutated script with plain python under a probe that
records, for every parameter (named by the root module's class), whether it moved and its final
value, and checks the stated symptom: a crash with the given text, a warning, parameters that do
not move although they move in the unmutated run, or final parameters that differ from the
unmutated run's (which must itself be reproducible: it is run twice).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from injected import measure, mutate  # noqa: E402

# (name, file, old text, new text, text of the root line in the edited file, symptom)
# symptom: ("raises", text in stderr) | ("still", class prefix of parameters that stop moving)
#          | ("differs", "") final parameters differ from the unmutated run's
#          | ("warns", text in stderr, and final parameters differ)
VAE = [
    ("sample() instead of rsample() in the reparameterization", "main.py",
     "        eps = torch.randn_like(std)\n        return mu + eps*std\n",
     "        return torch.distributions.Normal(mu, std).sample()\n",
     "Normal(mu, std).sample()", ("differs", "")),
    ("set_grad_enabled(False) for sampling leaks into the next epoch", "main.py",
     "        with torch.no_grad():\n            sample = torch.randn(64, 20).to(device)\n"
     "            sample = model.decode(sample).cpu()\n",
     "        torch.set_grad_enabled(False)\n        if True:\n            sample = torch.randn(64, 20)"
     ".to(device)\n            sample = model.decode(sample).cpu()\n",
     "torch.set_grad_enabled(False)", ("raises", "does not require grad")),
    ("reconstruction and input swapped in the BCE", "main.py",
     "F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')",
     "F.binary_cross_entropy(x.view(-1, 784), recon_x, reduction='sum')",
     "F.binary_cross_entropy(x.view(-1, 784), recon_x", ("differs", "")),
]
DCGAN = [
    ("fake not detached for the discriminator step", "main.py", "        output = netD(fake.detach())\n",
     "        output = netD(fake)\n", "output = netD(fake)", ("raises", "a second time")),
    ("fake detached once and reused for the generator step", "main.py",
     "        fake = netG(noise)\n        label.fill_", "        fake = netG(noise).detach()\n        label.fill_",
     "fake = netG(noise).detach()", ("still", "Generator")),
    ("generator optimizer built over the discriminator", "main.py",
     "optimizerG = optim.Adam(netG.parameters()", "optimizerG = optim.Adam(netD.parameters()",
     "optimizerG = optim.Adam(netD", ("still", "Generator")),
    ("netG.zero_grad() removed", "main.py", "        netG.zero_grad()\n", "",
     "        errG.backward()", ("differs", "")),
    ("optimizerG.step() before errG.backward()", "main.py",
     "        errG.backward()\n        D_G_z2 = output.mean().item()\n        optimizerG.step()\n",
     "        optimizerG.step()\n        errG.backward()\n        D_G_z2 = output.mean().item()\n",
     "optimizerG.step()\n        errG", ("still", "Generator")),
]
REINFORCE = [
    ("action selected under no_grad", "reinforce.py", "    probs = policy(state)\n",
     "    with torch.no_grad():\n        probs = policy(state)\n", "with torch.no_grad():",
     ("raises", "does not require grad")),
    ("saved log-probs not cleared after the update", "reinforce.py",
     "    del policy.rewards[:]\n    del policy.saved_log_probs[:]\n", "    del policy.rewards[:]\n",
     "del policy.rewards[:]",
     ("raises", "a second time")),
    ("policy-gradient sign flipped", "reinforce.py", "policy_loss.append(-log_prob * R)",
     "policy_loss.append(log_prob * R)", "policy_loss.append(log_prob * R)", ("differs", "")),
]
ACTOR_CRITIC = [
    ("advantage not detached from the critic", "actor_critic.py",
     "        advantage = R - value.item()\n", "        advantage = R - value\n",
     "advantage = R - value", ("differs", "")),
    ("critic value detached when stored", "actor_critic.py",
     "SavedAction(m.log_prob(action), state_value)", "SavedAction(m.log_prob(action), "
     "state_value.detach())", "state_value.detach()", ("still", "Policy.value_head")),
    ("optimizer.step() before loss.backward()", "actor_critic.py",
     "    loss.backward()\n    optimizer.step()\n", "    optimizer.step()\n    loss.backward()\n",
     "    optimizer.step()\n    loss.backward()", ("still", "Policy")),
]
TSP = [
    ("zero_grad missing in the LBFGS closure", "train.py",
     "            optimizer.zero_grad()\n            out = seq(input)\n", "            out = seq(input)\n",
     "            loss.backward()", ("differs", "")),
    ("closure's forward under no_grad copied from the prediction", "train.py",
     "            out = seq(input)\n            loss = criterion(out, target)\n",
     "            with torch.no_grad():\n                out = seq(input)\n            loss = criterion(out, "
     "target)\n", "with torch.no_grad():\n                out", ("raises", "does not require grad")),
]
MNIST_RNN = [
    ("scheduler.step() before the epoch's training", "main.py",
     "        train(args, model, device, train_loader, optimizer, epoch)\n        test(args, model, device, "
     "test_loader)\n        scheduler.step()\n",
     "        scheduler.step()\n        train(args, model, device, train_loader, optimizer, epoch)\n"
     "        test(args, model, device, test_loader)\n", "        scheduler.step()\n        train",
     ("warns", "lr_scheduler.step()` before `optimizer.step()")),
    ("model.train() missing after evaluation", "main.py",
     "def train(args, model, device, train_loader, optimizer, epoch):\n    model.train()\n",
     "def train(args, model, device, train_loader, optimizer, epoch):\n",
     "    for batch_idx, (data, target) in enumerate(train_loader):", ("differs", "")),
    ("LSTM output detached before the head", "main.py", "        output = output[:, -1, :]\n",
     "        output = output[:, -1, :].detach()\n", "output[:, -1, :].detach()", ("still", "Net.rnn")),
]
MNIST_FF = [
    ("layer outputs passed on without detach", "main.py",
     "        return self.forward(x_pos).detach(), self.forward(x_neg).detach()\n",
     "        return self.forward(x_pos), self.forward(x_neg)\n",
     "return self.forward(x_pos), self.forward(x_neg)", ("raises", "a second time")),
    ("zero_grad removed in the layer loop", "main.py", "            self.opt.zero_grad()\n", "",
     "            loss.backward()", ("differs", "")),
    ("loss.item() rebuilt into a tensor", "main.py",
     "            ).mean()\n            self.opt.zero_grad()\n",
     "            ).mean()\n            loss = torch.tensor(loss.item(), requires_grad=True)\n"
     "            self.opt.zero_grad()\n", "loss = torch.tensor(loss.item()", ("still", "Layer")),
]
GCN = [
    ("weight kept as a plain tensor, not nn.Parameter", "main.py",
     "        self.kernel = nn.Parameter(torch.Tensor(input_dim, output_dim))\n",
     "        self.kernel = torch.Tensor(input_dim, output_dim)\n", "self.kernel = torch.Tensor(",
     ("raises", "empty parameter list")),
    ("model.train() missing after evaluation", "main.py",
     "    model.train()\n    optimizer.zero_grad()\n", "    optimizer.zero_grad()\n",
     "    output = model(*input)", ("differs", "")),
]

TORCHVISION = {
    "__init__.py": "from . import datasets, transforms, utils\n",
    "utils.py": "def save_image(*args, **kwargs):\n    pass\n",
    "datasets.py": '''import torch


class _Random(torch.utils.data.Dataset):
    def __init__(self, n, shape, classes, transform, seed):
        g = torch.Generator().manual_seed(seed)
        self.x, self.y = torch.rand(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g)
        self.transform = transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        return (self.transform(x) if self.transform else x), int(self.y[i])


def MNIST(root, train=True, download=False, transform=None, target_transform=None):
    return _Random(256 if train else 128, (1, 28, 28), 10, transform, 0 if train else 1)


def FakeData(size=32, image_size=(3, 224, 224), num_classes=10, transform=None, **kwargs):
    return _Random(size, image_size, num_classes, transform, 2)
''',
    "transforms.py": '''import torch


class Compose:
    def __init__(self, ts):
        self.ts = ts

    def __call__(self, x):
        for t in self.ts:
            x = t(x)
        return x


class Lambda:
    def __init__(self, f):
        self.f = f

    def __call__(self, x):
        return self.f(x)


class Normalize:
    def __init__(self, mean, std):
        self.m, self.s = torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

    def __call__(self, x):
        return (x - self.m) / self.s


class _Same:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, x):
        return x


ToTensor = Resize = CenterCrop = _Same
''',
}
GYMNASIUM = '''import numpy as np


class _Spec:
    reward_threshold = 475.0


class _Env:
    spec = _Spec()

    def __init__(self):
        self._rng, self._t, self._s = np.random.default_rng(0), 0, None

    def reset(self, seed=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t, self._s = 0, self._rng.uniform(-0.05, 0.05, 4)
        return self._s.copy(), {}

    def step(self, action):
        self._t += 1
        push = np.array([0.1, 0.05, -0.03, 0.02]) * (1 if action else -1)
        self._s = self._s + push + self._rng.normal(0, 0.02, 4)
        return self._s.copy(), 1.0, bool(abs(self._s[0]) > 1.0 or self._t >= 60), False, {}

    def render(self):
        pass


def make(name, render_mode=None):
    return _Env()
'''
PROBE = '''import hashlib, json, os, random, runpy, sys, traceback
import numpy as np
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

out, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
random.seed(0); np.random.seed(0); torch.manual_seed(0)
first, modules = {}, {}


def _snap(params):
    for p in params:
        if id(p) not in first:
            first[id(p)] = (p, p.detach().clone())


def _pre(mod, args):
    modules.setdefault(id(mod), mod)
    _snap(mod.parameters(recurse=False))


def _step(opt, args, kwargs):
    _snap(p for g in opt.param_groups for p in g["params"])


h1 = torch.nn.modules.module.register_module_forward_pre_hook(_pre)
h2 = register_optimizer_step_pre_hook(_step)
error = None
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    error = None if e.code in (None, 0) else "SystemExit %s" % e.code
except BaseException as e:
    error = "%s: %s" % (type(e).__name__, e)
    traceback.print_exc()
h1.remove(); h2.remove()
inner = {id(c) for m in modules.values() for c in m.modules() if c is not m}
params, named = {}, set()
for m in modules.values():
    if id(m) in inner:
        continue
    for n, p in m.named_parameters():
        if id(p) in first and id(p) not in named:
            named.add(id(p))
            key, k = "%s.%s" % (type(m).__name__, n), 1
            while key in params:
                k += 1
                key = "%s.%s#%d" % (type(m).__name__, n, k)
            params[key] = {"moved": not torch.equal(first[id(p)][1], p.detach()),
                           "digest": hashlib.sha1(p.detach().cpu().numpy().tobytes()).hexdigest()}
json.dump({"error": error, "params": params}, open(out, "w"))
sys.exit(1 if error else 0)
'''


def _write(d: str, files: dict) -> None:
    os.makedirs(d, exist_ok=True)
    for name, text in files.items():
        open(os.path.join(d, name), "w", encoding="utf-8").write(text)


def _copy(src: str, dst: str, edits: list[tuple[str, str]] = ()) -> None:
    s = open(src, encoding="utf-8").read()
    for a, b in edits:
        if a not in s:
            raise SystemExit(f"{src}: cannot prepare, {a!r} not found")
        s = s.replace(a, b)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    open(dst, "w", encoding="utf-8").write(s)


def prepare(ex: str, work: str) -> list[tuple[str, str, list[str], list]]:
    """Copies of the scripts with made-up data: (suite, directory, argv, mutations)."""
    out = []

    def tree(name: str, stubs: str = "torchvision") -> str:
        d = os.path.join(work, name)
        if stubs == "torchvision":
            _write(os.path.join(d, "torchvision"), TORCHVISION)
        elif stubs == "gymnasium":
            _write(os.path.join(d, "gymnasium"), {"__init__.py": GYMNASIUM})
        return d

    d = tree("vae")
    _copy(os.path.join(ex, "vae", "main.py"), os.path.join(d, "main.py"))
    out.append(("vae", d, ["main.py", "--epochs", "2", "--batch-size", "32", "--log-interval", "4",
                           "--no-accel"], VAE))
    d = tree("dcgan")
    _copy(os.path.join(ex, "dcgan", "main.py"), os.path.join(d, "main.py"))
    out.append(("dcgan", d, ["main.py", "--dataset", "fake", "--batchSize", "8", "--imageSize", "64",
                             "--nz", "16", "--ngf", "8", "--ndf", "8", "--niter", "1", "--workers",
                             "0", "--manualSeed", "1", "--outf", "out"], DCGAN))
    for f, muts in (("reinforce.py", REINFORCE), ("actor_critic.py", ACTOR_CRITIC)):
        d = tree(f[:-3], "gymnasium")
        _copy(os.path.join(ex, "reinforcement_learning", f), os.path.join(d, f),
              [("for i_episode in count(1):", "for i_episode in range(1, 31):")])
        out.append((f[:-3], d, [f], muts))
    d = tree("time_sequence_prediction", "")
    _copy(os.path.join(ex, "time_sequence_prediction", "train.py"), os.path.join(d, "train.py"),
          [("torch.load('traindata.pt')", "torch.load('traindata.pt', weights_only=False)"),
           ("future = 1000", "future = 50")])
    import numpy as np
    import torch

    rng = np.random.RandomState(2)
    x = np.arange(100)[None, :] + rng.randint(-80, 80, 12).reshape(12, 1)
    torch.save(np.sin(x / 20.0).astype("float64"), os.path.join(d, "traindata.pt"))
    out.append(("time_sequence_prediction", d, ["train.py", "--steps", "2"], TSP))
    d = tree("mnist_rnn")
    _copy(os.path.join(ex, "mnist_rnn", "main.py"), os.path.join(d, "main.py"))
    out.append(("mnist_rnn", d, ["main.py", "--epochs", "2", "--batch-size", "32",
                                 "--test-batch-size", "64", "--log-interval", "4"], MNIST_RNN))
    d = tree("mnist_forward_forward")
    _copy(os.path.join(ex, "mnist_forward_forward", "main.py"), os.path.join(d, "main.py"))
    out.append(("mnist_forward_forward", d, ["main.py", "--epochs", "20", "--train_size", "256",
                                             "--test_size", "128", "--no_accel"], MNIST_FF))
    d = tree("gcn", "")
    src = os.path.join(ex, "gcn", "main.py")
    s = open(src, encoding="utf-8").read()
    a = s.index("    with requests.get(cora_url")
    b = s.index("\n\n", a)
    _copy(src, os.path.join(d, "main.py"), [(s[a:b], "    pass")])
    r = random.Random(0)
    os.makedirs(os.path.join(d, "cora"))
    with open(os.path.join(d, "cora", "cora.content"), "w") as fh:
        for i in range(1700):
            feats = [str(int(r.random() < 0.1)) for _ in range(60)]
            fh.write("\t".join([str(1000 + i), *feats, f"c{(i * 7) % 5}"]) + "\n")
    with open(os.path.join(d, "cora", "cora.cites"), "w") as fh:
        for i in range(1700):
            for j in r.sample(range(1700), 3):
                fh.write(f"{1000 + i}\t{1000 + j}\n")
    out.append(("gcn", d, ["main.py", "--epochs", "20", "--val-every", "5"], GCN))
    return out


def probe(work: str, tree: str, argv: list[str]) -> tuple[int, str, dict]:
    """Run ``argv`` in ``tree`` under the probe: (exit code, stderr, parameter record)."""
    pf, out = os.path.join(work, "probe.py"), tempfile.mktemp(suffix=".json", dir=work)
    if not os.path.exists(pf):
        open(pf, "w", encoding="utf-8").write(PROBE)
    p = subprocess.run([sys.executable, pf, out, *argv], cwd=tree, capture_output=True, text=True,
                       timeout=600)
    rec = json.load(open(out)) if os.path.exists(out) else {"error": "no record", "params": {}}
    return p.returncode, p.stderr, rec


def symptom(sym: tuple, rc: int, err: str, rec: dict, base: dict) -> tuple[bool, str]:
    """Is the stated symptom there? (verdict, what was seen)."""
    kind, text = sym
    moved = {k for k, v in rec["params"].items() if v["moved"]}
    if kind == "raises":
        last = (rec["error"] or "").splitlines()[0][:120] if rec["error"] else "no error"
        return rc != 0 and bool(rec["error"]) and text in err, last
    if kind == "still":
        mine = [k for k in base["params"] if k.startswith(text)]
        still = [k for k in mine if k not in moved]
        ok = bool(mine) and all(base["params"][k]["moved"] for k in mine) and bool(still)
        return ok and rc == 0, f"{len(still)}/{len(mine)} {text}* parameters not moving (all move unmutated)"
    same = [k for k, v in rec["params"].items() if base["params"].get(k, {}).get("digest") == v["digest"]]
    ok = rc == 0 and len(same) < len(base["params"]) and (kind != "warns" or text in err)
    return ok, (f"{len(base['params']) - len(same)}/{len(base['params'])} final parameters differ"
                + (", warning seen" if kind == "warns" and text in err else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", required=True, help="a clone of github.com/pytorch/examples")
    ap.add_argument("--only", help="only mutations (or suites) whose name holds this text")
    ap.add_argument("--verify", action="store_true",
                    help="run each mutated script with plain python and check its symptom")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gt-blind-")
    rows = []
    try:
        for suite, tree, argv, muts in prepare(args.examples, work):
            muts = [m for m in muts if not args.only or args.only in m[0] or args.only == suite]
            if not muts:
                continue
            if not args.verify:
                for m in muts:
                    r = measure(suite, tree, argv, m[:5], [])
                    rows.append(r["run"] + 2 * r["check"])
                    print(f"{'run ok ' if r['run'] else 'run -- '}{'check ok ' if r['check'] else 'check -- '}"
                          f"{suite}: {r['bug']} (root {r['root']}; run first {r['first']}, "
                          f"check {r['static']})", flush=True)
                continue
            rc, err, base = probe(work, tree, argv)
            rc2, _, base2 = probe(work, tree, argv)
            same = base["params"] == base2["params"]
            print(f"{suite}: unmutated run rc={rc}, {len(base['params'])} parameters, "
                  f"{sum(v['moved'] for v in base['params'].values())} move, reproducible={same}"
                  + (f"\n{err[-1500:]}" if rc else ""), flush=True)
            for m in muts:
                dst, line = mutate(tree, m[:5], [])
                try:
                    mrc, merr, rec = probe(work, dst, argv)
                finally:
                    shutil.rmtree(dst, ignore_errors=True)
                ok, seen = symptom(m[5], mrc, merr, rec, base)
                ok = ok and rc == 0 and (same or m[5][0] in ("raises", "still"))
                rows.append(ok)
                print(f"{'ok  ' if ok else 'FAIL'} {suite}: {m[0]} (root {m[1]}:{line}; expect "
                      f"{m[5][0]} {m[5][1]!r}; seen: {seen})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.verify:
        print(f"\n{len(rows)} mutations: symptom verified for {sum(rows)}")
    else:
        print(f"\n{len(rows)} injected bugs: run names the root first for "
              f"{sum(r & 1 for r in rows)}, check reports it for {sum(r >> 1 for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
