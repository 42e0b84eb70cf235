"""powerful-benchmarker TrainWithClassifier: the classifier MLP starts with ReLU(inplace=True) on the embeddings.

source: https://github.com/KevinMusgrave/powerful-benchmarker/issues/78
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    # layer_sizes[0] is the dimension of the input
    # layer_sizes[-1] is the dimension of the output
    def __init__(self, layer_sizes, final_relu=False):
        super().__init__()
        layer_list = []
        layer_sizes = [int(x) for x in layer_sizes]
        num_layers = len(layer_sizes) - 1
        final_relu_layer = num_layers if final_relu else num_layers - 1
        for i in range(len(layer_sizes) - 1):
            input_size = layer_sizes[i]
            curr_size = layer_sizes[i + 1]
            if i < final_relu_layer:
                layer_list.append(nn.ReLU(inplace=True))  # ROOT
            layer_list.append(nn.Linear(input_size, curr_size))
        self.net = nn.Sequential(*layer_list)

    def forward(self, x):
        return self.net(x)


def contrastive_loss(embeddings, labels, margin=0.5):
    emb = F.normalize(embeddings, p=2, dim=1)
    sim = emb @ emb.t()
    same = labels[:, None] == labels[None, :]
    return (F.relu(margin - sim) * ~same).mean() + ((1 - sim) * same).mean()


torch.manual_seed(0)
trunk = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
embedder = MLP([32, 8])
classifier = MLP([8, 8, 5])
models = [trunk, embedder, classifier]
optimizer = torch.optim.Adam([p for m in models for p in m.parameters()], lr=1e-4)
data, labels = torch.randn(8, 16), torch.randint(0, 5, (8,))
embeddings = embedder(trunk(data))
metric_loss = contrastive_loss(embeddings, labels)
classifier_loss = F.cross_entropy(classifier(embeddings), labels)
optimizer.zero_grad()
(metric_loss + classifier_loss).backward()  # SYMPTOM
optimizer.step()
