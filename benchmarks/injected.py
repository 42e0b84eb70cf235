"""Recall on real training scripts: inject one known bug, run `check` and `run` as a user would.

Each mutation below edits one real script (a copy), then runs ``gradtrace check`` on the edited
file and ``gradtrace run`` on the script, and asks: does `check` report the root line, and does
`run` name it *first*? The root is the line the user must change (for a removed call: the line
our rules name, the backward the clearing must precede). Scripts are public code the team did
not write; their data are made up on the spot (no download), and runs are kept short.

    git clone https://github.com/pytorch/examples /tmp/examples
    git clone https://github.com/karpathy/nanoGPT /tmp/nanoGPT
    python benchmarks/injected.py --examples /tmp/examples --nanogpt /tmp/nanoGPT [--only NAME]

About 30 s per mutation on a 2-core machine (most of it the scripts' own training).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile

from realworld import child_env  # PYTHONPATH made absolute: the scripts run in copies

# (name, file, old text, new text, text of the root line in the edited file)
MNIST = [
    ("item into the loss", "main.py", "        loss = F.nll_loss(output, target)\n",
     "        loss = torch.tensor(F.nll_loss(output, target).item(), requires_grad=True)\n",
     "loss = torch.tensor("),
    ("output detached", "main.py", "        output = model(data)\n        loss",
     "        output = model(data).detach()\n        loss", "output = model(data).detach()"),
    (".data in forward", "main.py", "        x = self.fc1(x)\n", "        x = self.fc1(x.data)\n",
     "self.fc1(x.data)"),
    ("torch.tensor of the loss", "main.py", "        loss = F.nll_loss(output, target)\n",
     "        loss = torch.tensor(F.nll_loss(output, target))\n", "loss = torch.tensor("),
    ("forward under no_grad", "main.py", "        optimizer.zero_grad()\n        output = model(data)\n",
     "        optimizer.zero_grad()\n        with torch.no_grad():\n            output = model(data)\n",
     "with torch.no_grad():"),
    ("set_grad_enabled(False) leaked by test()", "main.py", "    model.eval()\n    test_loss = 0\n",
     "    torch.set_grad_enabled(False)\n    model.eval()\n    test_loss = 0\n",
     "torch.set_grad_enabled(False)"),
    ("w = w - lr * w.grad", "main.py", "        optimizer.step()\n",
     "        for p in model.parameters():\n            p = p - args.lr * p.grad\n",
     "p = p - args.lr * p.grad"),
    ("layers in a plain list", "main.py",
     "        self.fc1 = nn.Linear(9216, 128)\n        self.fc2 = nn.Linear(128, 10)\n",
     "        self.fcs = [nn.Linear(9216, 128), nn.Linear(128, 10)]\n", "self.fcs = ["),
    ("model re-created after the optimizer", "main.py", "    scheduler = StepLR(",
     "    model = Net().to(device)\n    scheduler = StepLR(", "    model = Net().to(device)\n    sch"),
    ("zero_grad between backward and step", "main.py",
     "        optimizer.zero_grad()\n        output = model(data)\n        loss = F.nll_loss(output, "
     "target)\n        loss.backward()\n",
     "        output = model(data)\n        loss = F.nll_loss(output, target)\n        loss.backward()"
     "\n        optimizer.zero_grad()\n", "optimizer.zero_grad()"),
    ("zero_grad commented out", "main.py", "        optimizer.zero_grad()\n        output",
     "        # optimizer.zero_grad()\n        output", "# optimizer.zero_grad()"),
    ("zero_grad once, before the loop", "main.py",
     "    model.train()\n    for batch_idx, (data, target) in enumerate(train_loader):\n        data, "
     "target = data.to(device), target.to(device)\n        optimizer.zero_grad()\n",
     "    model.train()\n    optimizer.zero_grad()\n    for batch_idx, (data, target) in enumerate("
     "train_loader):\n        data, target = data.to(device), target.to(device)\n",
     "optimizer.zero_grad()"),
    ("backward on .item()", "main.py", "        loss.backward()\n", "        loss.item().backward()\n",
     "loss.item().backward()"),
]
MNIST_EXTRA = {"layers in a plain list": [("        x = self.fc1(x)\n", "        x = self.fcs[0](x)\n"),
                                          ("        x = self.fc2(x)\n", "        x = self.fcs[1](x)\n")]}
REGRESSION = [
    ("zero_grad removed (manual update)", "main.py", "    fc.zero_grad()\n", "    pass\n",
     "output.backward()"),
    ("prediction detached", "main.py", "F.smooth_l1_loss(fc(batch_x), batch_y)",
     "F.smooth_l1_loss(fc(batch_x).detach(), batch_y)", ".detach()"),
    ("w = w - lr * w.grad", "main.py", "        param.data.add_(-0.1 * param.grad)",
     "        param = param - 0.1 * param.grad", "param = param - 0.1"),
    ("forward under no_grad", "main.py", "    output = F.smooth_l1_loss(fc(batch_x), batch_y)\n",
     "    with torch.no_grad():\n        pred = fc(batch_x)\n    output = F.smooth_l1_loss(pred, "
     "batch_y)\n", "with torch.no_grad():"),
]
WLM = [
    ("hidden state not detached", "main.py",
     "            hidden = repackage_hidden(hidden)\n            output, hidden = model(data, hidden)",
     "            output, hidden = model(data, hidden)", "output, hidden = model(data, hidden)"),
    ("w = w - lr * w.grad", "main.py", "                p.data.add_(p.grad, alpha=-lr)",
     "                p = p - lr * p.grad", "p = p - lr * p.grad"),
    ("output detached", "main.py", "        loss = criterion(output, targets)\n        loss.backward()",
     "        loss = criterion(output.detach(), targets)\n        loss.backward()", "output.detach()"),
]
NANOGPT = [
    ("zero_grad commented out", "train.py", "    optimizer.zero_grad(set_to_none=True)\n",
     "    # optimizer.zero_grad(set_to_none=True)\n", "# optimizer.zero_grad("),
    ("detach inside the model", "model.py", "        x = self.transformer.ln_f(x)\n",
     "        x = self.transformer.ln_f(x.detach())\n", "ln_f(x.detach())"),
    ("loss rebuilt from .item()", "train.py", "            loss = loss / gradient_accumulation_steps",
     "            loss = torch.tensor(loss.item(), requires_grad=True) / gradient_accumulation_steps",
     "loss.item()"),
    ("model re-created after the optimizer", "train.py", "# compile the model\n",
     "model = GPT(gptconf)\n# compile the model\n", "model = GPT(gptconf)\n# compile"),
    ("forward under no_grad", "train.py", "        with ctx:\n            logits, loss = model(X, Y)",
     "        with torch.no_grad():\n            logits, loss = model(X, Y)", "with torch.no_grad():"),
]
NANOGPT_CONFIG = """out_dir = {out!r}
eval_interval = 1000
eval_iters = 2
log_interval = 1000
always_save_checkpoint = False
dataset = 'shakespeare_char'
gradient_accumulation_steps = 1
batch_size = 8
block_size = 32
n_layer = 2
n_head = 2
n_embd = 32
dropout = 0.1
max_iters = 4
lr_decay_iters = 4
warmup_iters = 2
device = 'cpu'
compile = False
dtype = 'float32'
"""


def prepare(args: argparse.Namespace, work: str) -> list[tuple[str, str, list[str], list]]:
    """Copies of the scripts with made-up data: (suite, directory, argv, mutations)."""
    out = []
    if args.examples:
        d = os.path.join(work, "mnist")
        os.makedirs(d)
        s = open(os.path.join(args.examples, "mnist", "main.py"), encoding="utf-8").read()
        s = s.replace("from torchvision import datasets, transforms\n", "")
        a, b = s.index("    transform=transforms.Compose(["), s.index("    train_loader = ")
        s = s[:a] + ("    g = torch.Generator().manual_seed(0)\n"
                     "    dataset1 = torch.utils.data.TensorDataset(torch.randn(256, 1, 28, 28, "
                     "generator=g), torch.randint(0, 10, (256,), generator=g))\n"
                     "    dataset2 = torch.utils.data.TensorDataset(torch.randn(128, 1, 28, 28, "
                     "generator=g), torch.randint(0, 10, (128,), generator=g))\n") + s[b:]
        open(os.path.join(d, "main.py"), "w", encoding="utf-8").write(s)
        out.append(("mnist", d, ["main.py", "--epochs", "2"], MNIST))
        d = os.path.join(work, "regression")
        shutil.copytree(os.path.join(args.examples, "regression"), d)
        p = os.path.join(d, "main.py")
        s = open(p, encoding="utf-8").read().replace("for batch_idx in count(1):",
                                                     "for batch_idx in range(1, 300):")
        open(p, "w", encoding="utf-8").write(s)
        out.append(("regression", d, ["main.py"], REGRESSION))
        d = os.path.join(work, "word_language_model")
        os.makedirs(os.path.join(d, "data", "wikitext-2"))
        for f in ("main.py", "model.py", "data.py"):
            shutil.copy(os.path.join(args.examples, "word_language_model", f), d)
        rng = random.Random(0)
        for split, n in (("train", 300), ("valid", 60), ("test", 60)):
            with open(os.path.join(d, "data", "wikitext-2", f"{split}.txt"), "w") as fh:
                fh.writelines(" ".join(f"w{rng.randrange(300)}" for _ in range(12)) + "\n"
                              for _ in range(n))
        out.append(("word_language_model", d, ["main.py", "--epochs", "1", "--emsize", "16",
                                               "--nhid", "16", "--nlayers", "1", "--bptt", "10",
                                               "--batch_size", "8", "--save",
                                               os.path.join(d, "m.pt")], WLM))
    if args.nanogpt:
        import numpy as np

        d = os.path.join(work, "nanoGPT")
        os.makedirs(os.path.join(d, "data", "shakespeare_char"))
        for f in ("model.py", "train.py", "configurator.py"):
            shutil.copy(os.path.join(args.nanogpt, f), d)
        data = os.path.join(d, "data", "shakespeare_char")
        chars = [chr(c) for c in range(32, 97)]
        with open(os.path.join(data, "meta.pkl"), "wb") as fh:
            pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)),
                         "stoi": {c: i for i, c in enumerate(chars)}}, fh)
        rng = np.random.default_rng(0)
        for split, n in (("train", 20000), ("val", 4000)):
            rng.integers(0, len(chars), n).astype(np.uint16).tofile(os.path.join(data, f"{split}.bin"))
        with open(os.path.join(d, "tiny.py"), "w") as fh:
            fh.write(NANOGPT_CONFIG.format(out=os.path.join(d, "out")))
        out.append(("nanoGPT", d, ["train.py", "tiny.py"], NANOGPT))
    return out


def mutate(tree: str, m: tuple, extra: list) -> tuple[str, int]:
    """A copy of ``tree`` with mutation ``m``; returns the copy and the root line."""
    name, path, old, new, root = m
    dst = tempfile.mkdtemp(prefix="gt-inject-")
    shutil.copytree(tree, dst, dirs_exist_ok=True)
    f = os.path.join(dst, path)
    s = open(f, encoding="utf-8").read()
    if s.count(old) != 1:
        raise SystemExit(f"{name}: the text to replace occurs {s.count(old)} times in {path}")
    start = s.index(old)
    s = s.replace(old, new)
    for a, b in extra:
        s = s.replace(a, b)
    open(f, "w", encoding="utf-8").write(s)
    at = s.index(root, max(0, start - len(root)))
    return dst, s[:at].count("\n") + 1


def measure(suite: str, tree: str, argv: list[str], m: tuple, extra: list) -> dict:
    dst, line = mutate(tree, m, extra)
    path = m[1]
    try:
        st = subprocess.run([sys.executable, "-m", "gradtrace", "check", "--format", "json",
                             "--no-cache", path], cwd=dst, capture_output=True, text=True,
                            env=child_env())
        static = [(f["code"], f["line"]) for f in json.loads(st.stdout)["findings"]
                  if os.path.basename(f["path"]) == os.path.basename(path)]
        out = os.path.join(dst, "findings.json")
        subprocess.run([sys.executable, "-m", "gradtrace", "run", "--quiet", "--json-out", out,
                        *argv], cwd=dst, capture_output=True, text=True, timeout=900,
                       env=child_env())
        found = json.load(open(out))["findings"] if os.path.exists(out) else []
        first = [(f["code"], os.path.basename(f["path"] or ""), f["line"]) for f in found[:1]]
    finally:
        shutil.rmtree(dst, ignore_errors=True)
    return {"suite": suite, "bug": m[0], "root": f"{path}:{line}",
            "check": any(ln == line for _, ln in static),
            "run": bool(first) and first[0][1:] == (os.path.basename(path), line),
            "static": static, "first": first}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", help="a clone of github.com/pytorch/examples")
    ap.add_argument("--nanogpt", help="a clone of github.com/karpathy/nanoGPT")
    ap.add_argument("--only", help="only mutations whose name holds this text")
    args = ap.parse_args()
    if not (args.examples or args.nanogpt):
        ap.error("give --examples and/or --nanogpt")
    work = tempfile.mkdtemp(prefix="gt-injected-")
    rows = []
    try:
        for suite, tree, argv, muts in prepare(args, work):
            for m in muts:
                if args.only and args.only not in m[0]:
                    continue
                r = measure(suite, tree, argv, m, MNIST_EXTRA.get(m[0], []) if suite == "mnist"
                            else [])
                rows.append(r)
                print(f"{'run ok ' if r['run'] else 'run -- '}{'check ok ' if r['check'] else 'check -- '}"
                      f"{suite}: {r['bug']} (root {r['root']}; run first {r['first']}, "
                      f"check {r['static']})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = len(rows)
    print(f"\n{n} injected bugs: run names the root first for {sum(r['run'] for r in rows)}, "
          f"check reports it for {sum(r['check'] for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
