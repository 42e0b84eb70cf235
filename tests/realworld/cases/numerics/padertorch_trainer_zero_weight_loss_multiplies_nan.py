"""padertorch's Trainer sums a model's named losses as `loss = loss + (weight * value)` with the configured `loss_weights`; a loss switched off with weight 0 still enters the sum, and when that term is NaN on a batch (here the scale-invariant SDR of a silent reference, 0/0) `0 * nan` is NaN, so the total loss is NaN and the trainer's finiteness check stops training although the only weighted loss is finite.

source: https://github.com/fgnt/padertorch/commit/c9c37e5d2a4d2b5e4cb67c7c3788064b8c56ad6e
kind: bug
symptom: crash
verified: AssertionError
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Trainer:
    def __init__(self, model, optimizer, loss_weights=None):
        self.model, self.optimizer, self.loss_weights = model, optimizer, loss_weights

    def step(self, example):
        model_out = self.model(example)
        review = self._maybe_add_loss_to_review(self.model.review(example, model_out))
        self.optimizer.zero_grad()
        review["loss"].backward()
        self.optimizer.step()
        return review

    def _maybe_add_loss_to_review(self, review):
        if "losses" in review:
            assert "loss" not in review, review
            losses = review["losses"]
            loss = 0.
            loss_weights = self.loss_weights
            if len(losses) != 1:
                if loss_weights is None or set(loss_weights.keys()) != set(losses.keys()):
                    raise Exception("You can not have multiple losses without specifying a loss_weight for each loss.")
            for key, value in losses.items():
                weight = loss_weights[key] if loss_weights is not None else 1.
                loss = loss + (weight * value)  # ROOT
                if "scalars" not in review:
                    review["scalars"] = {}
                review["scalars"][f"{key}_loss_weight"] = weight
            review["loss"] = loss
        else:
            assert "loss" in review, review
        assert review["loss"].dim() == 0, review["loss"]
        assert torch.isfinite(review["loss"]), review  # SYMPTOM
        return review


def si_sdr(estimate, reference):
    alpha = (estimate * reference).sum(-1, keepdim=True) / (reference ** 2).sum(-1, keepdim=True)
    target = alpha * reference
    return 10 * torch.log10((target ** 2).sum(-1) / ((estimate - target) ** 2).sum(-1))


class Enhancer(nn.Module):
    def __init__(self, frame=64):
        super().__init__()
        self.mask = nn.Sequential(nn.Linear(frame, 128), nn.ReLU(), nn.Linear(128, frame), nn.Sigmoid())

    def forward(self, example):
        return self.mask(example["observation"]) * example["observation"]

    def review(self, example, estimate):
        return dict(losses=dict(
            mse=((estimate - example["speech"]) ** 2).mean(),
            si_sdr=-si_sdr(estimate, example["speech"]).mean(),
        ))


model = Enhancer()
trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), loss_weights={"mse": 1., "si_sdr": 0.})
for iteration in range(6):
    speech = torch.randn(8, 64)
    if iteration == 3:
        speech[2] = 0.  # an utterance that is silent in this frame
    example = {"speech": speech, "observation": speech + 0.3 * torch.randn(8, 64)}
    review = trainer.step(example)
    print(f"iteration {iteration}: loss {review['loss'].item():.4f}")
