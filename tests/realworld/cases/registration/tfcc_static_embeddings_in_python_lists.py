"""temporal-fusion-contrastive-learning's `StaticEmbedding.__init__` builds one `nn.Embedding` per categorical static variable and one `nn.Linear` per real-valued static variable, but keeps them in plain Python lists (`self.embeddings = []`, `self.emb_regulars = []`): they are not registered submodules, so the model's `parameters()` (and the optimizer built from it) and its `state_dict()` never see them. The static embeddings stay at their random initialisation while the rest of the model trains, and a saved checkpoint silently lacks them.

source: https://github.com/IKKIM00/temporal-fusion-contrastive-learning/commit/9f61938e0b31b210ffa33cc9355a88025be6e87d
kind: bug
symptom: silent
verified: the optimizer holds 0 of the 7 tensors of the 5 static embedding/linear layers, their weights do not move during training (max change 0.0) and the state_dict has 0 keys under static_embedding; the look-alike's optimizer holds all 7, they move, and its state_dict has 7 static_embedding keys
"""
import json

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class GatedResidualNetwork(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim=None, dropout=0.1):
        super().__init__()
        output_dim = output_dim or input_dim
        self.skip = nn.Linear(input_dim, output_dim) if input_dim != output_dim else nn.Identity()
        self.fc1 = nn.Linear(input_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, 2 * output_dim)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(output_dim)

    def forward(self, x):
        h = self.dropout(self.fc2(nn.functional.elu(self.fc1(x))))
        return self.norm(self.skip(x) + nn.functional.glu(h, dim=-1))


class StaticEmbedding(nn.Module):
    """Transform static data into static input: linear maps for real-valued variables, embeddings for categorical."""

    def __init__(self, model_params, device):
        super().__init__()
        params = dict(model_params)
        self.output_dim = int(params["output_dim"])
        self.category_counts = json.loads(str(params["category_counts"]))
        self._static_regular_inputs = json.loads(str(params["static_regular_inputs"]))
        self._static_categorical_inputs = json.loads(str(params["static_categorical_inputs"]))
        self.device = device
        self.num_categorical_variables = len(self._static_categorical_inputs)
        self.num_regular_variables = len(self._static_regular_inputs)

        embedding_sizes = [self.output_dim for i, size in enumerate(self.category_counts)]
        self.embeddings = []  # ROOT
        for i in range(self.num_categorical_variables):
            embedding = nn.Embedding(num_embeddings=self.category_counts[i], embedding_dim=embedding_sizes[i]).to(device)
            self.embeddings.append(embedding)
        self.emb_regulars = []
        for i in range(self.num_regular_variables):
            emb_reg = nn.Linear(1, self.output_dim).to(device)
            self.emb_regulars.append(emb_reg)

    def forward(self, all_inputs):
        regular_inputs = all_inputs[:, :self.num_regular_variables]
        categorical_inputs = all_inputs[:, self.num_regular_variables:]
        cate_embedded_inputs = [self.embeddings[i](categorical_inputs[..., i].int())
                                for i in range(self.num_categorical_variables)]
        reg_embedded_inputs = [self.emb_regulars[i](regular_inputs[:, i].float().reshape(-1, 1))
                               for i in range(self.num_regular_variables)]
        return torch.stack(cate_embedded_inputs + reg_embedded_inputs, dim=1)


class StaticVariableSelection(nn.Module):
    def __init__(self, num_statics, output_dim, dropout=0.1):
        super().__init__()
        self.flatten = nn.Flatten()
        self.grn = GatedResidualNetwork(num_statics * output_dim, output_dim, num_statics, dropout)
        self.var_grns = nn.ModuleList(GatedResidualNetwork(output_dim, output_dim, dropout=dropout)
                                      for _ in range(num_statics))
        self.softmax = nn.Softmax(dim=1)

    def forward(self, embedding):
        sparse_weights = self.softmax(self.grn(self.flatten(embedding))).unsqueeze(-1)
        transformed = torch.stack([grn(embedding[:, i]) for i, grn in enumerate(self.var_grns)], dim=1)
        return (sparse_weights * transformed).sum(dim=1), sparse_weights


class ActivityClassifier(nn.Module):
    """A temporal conv encoder for the sensor sequence, conditioned on the selected static context."""

    def __init__(self, model_params, device, channels=3, num_classes=4):
        super().__init__()
        dim = int(model_params["output_dim"])
        self.static_embedding = StaticEmbedding(model_params, device)
        num_statics = self.static_embedding.num_categorical_variables + self.static_embedding.num_regular_variables
        self.static_selection = StaticVariableSelection(num_statics, dim)
        self.encoder = nn.Sequential(nn.Conv1d(channels, dim, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
                                     nn.Flatten())
        self.head = nn.Linear(2 * dim, num_classes)

    def forward(self, sequence, static):
        static_vec, _ = self.static_selection(self.static_embedding(static))
        return self.head(torch.cat([self.encoder(sequence), static_vec], dim=-1))


model_params = {"output_dim": 16, "category_counts": "[2, 5, 3]", "static_regular_inputs": '["age", "height"]',
                "static_categorical_inputs": '["gender", "group", "device"]'}
model = ActivityClassifier(model_params, "cpu")
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

N = 256
sequences = torch.randn(N, 3, 40)
regular = torch.randn(N, 2)
categorical = torch.stack([torch.randint(0, c, (N,)) for c in (2, 5, 3)], dim=1).float()
static = torch.cat([regular, categorical], dim=1)
labels = (categorical[:, 1].long() + (sequences[:, 0].mean(-1) > 0).long()) % 4

static_layers = model.static_embedding.embeddings + model.static_embedding.emb_regulars
static_tensors = [p for layer in static_layers for p in layer.parameters()]
before = [p.detach().clone() for p in static_tensors]
in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}

model.train()
for epoch in range(6):
    for idx in torch.randperm(N).split(64):
        loss = nn.functional.cross_entropy(model(sequences[idx], static[idx]), labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

held = sum(id(p) in in_optimizer for p in static_tensors)
change = max((p.detach() - b).abs().max().item() for p, b in zip(static_tensors, before))
keys = [k for k in model.state_dict() if k.startswith("static_embedding.")]
print(f"optimizer holds {held} of the {len(static_tensors)} static embedding/linear tensors")
print(f"max change of the static embedding weights: {change}")
print(f"state_dict keys under static_embedding: {len(keys)}; final loss {loss.item():.3f}")
