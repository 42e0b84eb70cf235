"""Session 35, the lead: token ids made by a generate loop decorated with
``@torch.inference_mode()`` and kept as the next training step's input (NOTE [inference ids
kept by the caller]). Integer ids never carry a graph, so inference mode is right where they
are made; what fails is the caller keeping them for a forward whose embedding saves them. The
run names the call that keeps them; with ``.clone()`` there it is silent; floating features
from a decorated function still name the decorator."""
from __future__ import annotations

from rt_helpers import marked_line

SRC = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16)

    def forward(self, ids):
        return self.head(self.emb(ids))

    @torch.inference_mode()
    def generate(self, ids, n=3):
        for _ in range(n):
            nxt = self(ids)[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
        return ids


def rollout(model, prompt):
    with torch.no_grad():
        seqs = model.generate(prompt)  # <- cause
    return seqs


model = LM()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    seqs = rollout(model, torch.randint(0, 16, (2, 4)))
    logits = model(seqs[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 16), seqs[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_ids_from_an_inference_mode_generate_name_the_call_that_keeps_them(run_script):
    res = run_script(SRC)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT204", marked_line(SRC)), res.findings
    decorator = marked_line(SRC, "@torch.inference_mode()")
    assert any(r["line"] == decorator for r in first["related"]), first


def test_ids_cloned_by_the_caller_are_silent(run_script):
    res = run_script(SRC.replace("model.generate(prompt)", "model.generate(prompt).clone()"))
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["code"] == "GT204"] == [], res.findings


def test_floating_features_from_a_decorated_function_name_the_decorator(run_script):
    src = SRC.replace("logits = model(seqs[:, :-1])",
                      "logits = model.head(model.features(seqs[:, :-1]))").replace(
        "    @torch.inference_mode()\n    def generate",
        "    @torch.inference_mode()\n    def features(self, ids):\n"
        "        return self.emb(ids)\n\n    def generate")
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    decorator = marked_line(src, "@torch.inference_mode()")
    assert (first["code"], first["line"]) == ("GT204", decorator), res.findings
