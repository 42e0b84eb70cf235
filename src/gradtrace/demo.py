"""`gradtrace demo`: a small broken training script, checked statically and then run traced."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile

SCRIPT = '''\
"""A tiny regression whose loss is rebuilt from a Python float: the model never trains."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 4), torch.randn(64, 1)

for step in range(3):
    optimizer.zero_grad()
    mse = nn.functional.mse_loss(model(x), y).item()   # the graph is cut here
    loss = torch.tensor(mse, requires_grad=True)        # ...and this hides it
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
'''


def run_demo() -> int:
    """Write the demo script to a temporary folder, check it, then run it under tracing."""
    from gradtrace.lint import check_source
    from gradtrace.formats import summary_line, to_text

    with tempfile.TemporaryDirectory(prefix="gradtrace-demo-") as tmp:
        path = os.path.join(tmp, "train.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(SCRIPT)
        print("$ gradtrace check train.py\n")
        findings = check_source(SCRIPT, "train.py")
        sources = {"train.py": SCRIPT}
        print(to_text(findings, sources) + summary_line(findings) + "\n")
        if importlib.util.find_spec("torch") is None:
            print("(install torch to see `gradtrace run` diagnose it at run time: "
                  "pip install 'gradtrace[torch]')")
            return 1 if findings else 0
        print("$ gradtrace run train.py\n", flush=True)
        proc = subprocess.run([sys.executable, "-m", "gradtrace", "run", "train.py"], cwd=tmp)
        return 1 if findings or proc.returncode else 0
