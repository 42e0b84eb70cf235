"""namiyousef/multi-task-learning's `RandomCombinedLoss` after its fix: `constrained_bernoulli` redraws the 0/1 task mask while every task drew 0, so the normalising sum is never zero, the task weights are always finite and the shared weights stay finite through training.

source: https://github.com/namiyousef/multi-task-learning/commit/863e376b533e0fb69e14f58f79a5ac251814ebcb
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class CombinedLoss(nn.Module):
    def __init__(self, loss_dict):
        super().__init__()
        self.loss_dict = loss_dict
        self.sf = torch.ones(len(loss_dict))

    def calculate_loss(self, outputs, targets, weights):
        return {task: weight * sf * loss(outputs[task], targets[task])
                for (task, loss), weight, sf in zip(self.loss_dict.items(), weights, self.sf)}


class RandomCombinedLoss(CombinedLoss):
    def __init__(self, loss_dict, prior, frequency):
        super().__init__(loss_dict)
        self.prior = getattr(self, prior)
        self.frequency = frequency
        self.mini_batch_counter = 0
        self.weights = None

    def forward(self, outputs, targets):
        if self.mini_batch_counter % self.frequency == 0:
            self.weights = self.prior()
        self.mini_batch_counter += 1
        return sum(self.calculate_loss(outputs, targets, self.weights).values())

    def constrained_bernoulli(self):
        probas = torch.randint(0, 2, size=(len(self.loss_dict),))
        while torch.all(probas == 0):
            probas = torch.randint(0, 2, size=(len(self.loss_dict),))
        return probas / torch.sum(probas, dtype=torch.float)


class HardSharingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(12, 16), nn.ReLU())
        self.heads = nn.ModuleDict({"class": nn.Linear(16, 3), "seg": nn.Linear(16, 12),
                                    "bb": nn.Linear(16, 4)})

    def forward(self, x):
        h = self.encoder(x)
        return {task: head(h) for task, head in self.heads.items()}


def main():
    model = HardSharingModel()
    criterion = RandomCombinedLoss({"class": nn.CrossEntropyLoss(), "seg": nn.BCEWithLogitsLoss(),
                                    "bb": nn.L1Loss()}, prior="constrained_bernoulli", frequency=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    first_bad = None
    for step in range(12):
        x = torch.randn(8, 12, generator=gen)
        targets = {"class": torch.randint(0, 3, (8,), generator=gen),
                   "seg": (torch.rand(8, 12, generator=gen) > 0.5).float(),
                   "bb": torch.rand(8, 4, generator=gen)}
        loss = criterion(model(x), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if first_bad is None and torch.isnan(criterion.weights).any():
            first_bad = (step, criterion.weights)
        print(f"mini-batch {step} weights {criterion.weights.tolist()} loss {loss.item():.4f}")
    nan_params = sum(bool(torch.isnan(p).any()) for p in model.parameters())
    print("first all-zero draw:", first_bad)
    print(f"parameter tensors holding NaN: {nan_params} of {len(list(model.parameters()))}")


if __name__ == "__main__":
    main()
