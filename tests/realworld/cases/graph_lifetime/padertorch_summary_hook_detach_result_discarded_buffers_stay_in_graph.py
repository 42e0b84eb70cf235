"""padertorch's SummaryHook keeps the tensors a model's `review` puts under "buffers" until the model's `modify_summary` turns them into metrics, passing each through `_detach` first; `_detach` calls `buffer.detach()` and throws the result away, so the buffered tensors are the ones still attached to their iteration's graph, and the numpy metric code in `modify_summary` fails when the summary is written.

source: https://github.com/fgnt/padertorch/commit/687b68aa0e9cea53299b1387b7c9fd4a9f583f3b
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad
"""
import types
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


class SummaryHook:
    def __init__(self, summary_trigger=10):
        self.summary_trigger = summary_trigger
        self.reset_summary()

    @staticmethod
    def empty_summary_dict():
        return types.MappingProxyType(dict(scalars=defaultdict(list), buffers=defaultdict(list)))

    def reset_summary(self):
        self.summary = self.empty_summary_dict()

    def update_summary(self, review):
        popped_review = {**review}
        self.summary["scalars"]["loss"].append(popped_review.pop("loss").item())
        for key, buffer in popped_review.pop("buffers", dict()).items():
            self.summary["buffers"][key].append(self._detach(buffer))
        assert len(popped_review) == 0, popped_review

    @staticmethod
    def _detach(buffer):
        if torch.is_tensor(buffer):
            buffer.detach()  # ROOT
        return buffer

    def post_step(self, model, iteration, review):
        self.update_summary(review)
        if (iteration + 1) % self.summary_trigger == 0:
            summary = model.modify_summary(dict(self.summary))  # SYMPTOM
            print(f"iteration {iteration + 1}: {dict(summary['scalars'])}")
            self.reset_summary()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, example):
        return self.net(example["features"])

    def review(self, example, logits):
        loss = nn.functional.cross_entropy(logits, example["label"])
        posterior = logits.softmax(dim=-1)[:, 1]
        return dict(loss=loss, buffers=dict(posterior=posterior, label=example["label"]))

    def modify_summary(self, summary):
        posterior = np.concatenate(summary["buffers"].pop("posterior"))
        label = np.concatenate(summary["buffers"].pop("label"))
        decision = posterior > 0.5
        tp = np.sum(decision & (label == 1))
        summary["scalars"]["f_score"] = 2 * tp / max(np.sum(decision) + np.sum(label == 1), 1)
        for key, scalar in summary["scalars"].items():
            summary["scalars"][key] = np.mean(scalar)
        assert len(summary["buffers"]) == 0, "intermediate format buffers has to be converted during modify_summary"
        return summary


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
hook = SummaryHook(summary_trigger=10)
for iteration in range(20):
    example = {"features": torch.randn(32, 20), "label": torch.randint(0, 2, (32,))}
    logits = model(example)
    review = model.review(example, logits)
    optimizer.zero_grad()
    review["loss"].backward()
    optimizer.step()
    hook.post_step(model, iteration, review)
