"""Transformers4Rec's MergeTabular keeps the tabular modules it merges in a plain list (self.to_merge = list(to_merge)): the embedding tables of the merged EmbeddingFeatures are not registered as submodules, so they are missing from model.parameters() (and from .to(device) and the state_dict), and the optimizer built from the model never updates them.

source: https://github.com/NVIDIA-Merlin/Transformers4Rec/pull/113
kind: bug
symptom: silent
verified: the model has 2 parameter tensors (the head's) instead of 3, and after 20 Adam steps the item-id embedding table moved 0.0 while the head moved 0.4915; with self.to_merge = torch.nn.ModuleList(to_merge) (the fix, PR 113) the table is registered and moves 2.7399
"""
from functools import reduce

import torch


class TabularModule(torch.nn.Module):  # TabularMixin's aggregation on the output reduced to a concat option
    def __init__(self, aggregation=None):
        super().__init__()
        self.input_size = None
        self.aggregation = aggregation

    def __call__(self, inputs):
        outputs = super().__call__(inputs)
        if self.aggregation == "concat":
            return torch.cat([outputs[name] for name in sorted(outputs)], dim=-1)
        return outputs


class EmbeddingFeatures(TabularModule):
    def __init__(self, feature_config):
        super().__init__()
        self.embedding_tables = torch.nn.ModuleDict(
            {name: torch.nn.Embedding(cardinality, dim) for name, (cardinality, dim) in feature_config.items()})

    def forward(self, inputs):
        return {name: table(inputs[name]) for name, table in self.embedding_tables.items()}


class ContinuousFeatures(TabularModule):
    def __init__(self, features):
        super().__init__()
        self.features = features

    def forward(self, inputs):
        return {name: inputs[name][:, None] for name in self.features}


class MergeTabular(TabularModule):
    def __init__(self, *to_merge, aggregation=None):
        if all(isinstance(x, dict) for x in to_merge):
            self.to_merge = reduce(lambda a, b: dict(a, **b), to_merge)
        else:
            self.to_merge = list(to_merge)  # ROOT
        super().__init__(aggregation)

    @property
    def merge_values(self):
        if isinstance(self.to_merge, dict):
            return list(self.to_merge.values())
        return self.to_merge

    def forward(self, inputs):
        assert isinstance(inputs, dict), "Inputs needs to be a dict"
        outputs = {}
        for layer in self.merge_values:
            outputs.update(layer(inputs))
        return outputs


torch.manual_seed(0)
tabular = MergeTabular(EmbeddingFeatures({"item_id": (50, 8)}), ContinuousFeatures(["price", "age_days"]), aggregation="concat")
model = torch.nn.Sequential(tabular, torch.nn.Linear(10, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
batch = {"item_id": torch.randint(0, 50, (64,)), "price": torch.rand(64), "age_days": torch.rand(64)}
target = (batch["item_id"] % 7).float()[:, None] / 7
table = tabular.to_merge[0].embedding_tables["item_id"]
table_before, head_before = table.weight.detach().clone(), model[1].weight.detach().clone()
for step in range(20):
    loss = torch.nn.functional.mse_loss(model(batch), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("parameter tensors in the model:", len(list(model.parameters())))
print("embedding table moved", round((table.weight - table_before).norm().item(), 4),
      "| head moved", round((model[1].weight - head_before).norm().item(), 4))
