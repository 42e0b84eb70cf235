"""Knowledge editing: subtracting an embedding from one column of a dense weight in place.

source: https://github.com/Hunter-DDM/knowledge-neurons/issues/14
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Output(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(16, 8)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.output = Output()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.ModuleList(Layer() for _ in range(2))


model = nn.Module()
model.encoder = Encoder()
layer, pos = 1, 3
ori_pred_emb, tgt_emb = torch.randn(8), torch.randn(8)
lambda_1, lambda_2 = 0.5, 0.5
model.encoder.layer[layer].output.dense.weight[:, pos] -= ori_pred_emb * lambda_1  # ROOT
model.encoder.layer[layer].output.dense.weight[:, pos] += tgt_emb * lambda_2
