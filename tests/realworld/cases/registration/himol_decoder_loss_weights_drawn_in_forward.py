"""HiMol's Model_decoder weights its five pre-training losses with softmax(loss_weight), meant (as in the paper) to be learned, but forward() draws loss_weight = create_var(torch.rand(5), device, requires_grad=True) anew on every call: the weights are random each step, the tensor is never a registered parameter or in the optimizer, and the gradient it receives is thrown away with it.

source: https://github.com/ZangXuan/HiMol/issues/3
kind: bug
symptom: silent
verified: the decoder has 10 parameter tensors and none holds the loss weights; over 15 Adam steps the first softmax weight takes 15 unrelated random values (0.109 to 0.258, std 0.042) and nothing is learned; with the weights as an nn.Parameter built in __init__ the decoder has 11 tensors and the first weight moves steadily from 0.184 to 0.200 (std 0.005)
"""
import torch
import torch.nn as nn
from torch.autograd import Variable

MAX_BOND_TYPE = 4
MAX_ATOM_TYPE = 10


def create_var(tensor, device, requires_grad=None):
    if requires_grad is None:
        return Variable(tensor).to(device)
    else:
        return Variable(tensor, requires_grad=requires_grad).to(device)


class GNNEncoder(nn.Module):
    def __init__(self, in_dim=8, hidden_size=16):
        super().__init__()
        self.lin1 = nn.Linear(in_dim, hidden_size)
        self.lin2 = nn.Linear(hidden_size, hidden_size)

    def forward(self, x, adj):
        h = torch.relu(self.lin1(adj @ x))
        return self.lin2(adj @ h)


class Model_decoder(nn.Module):
    def __init__(self, hidden_size, device):
        super(Model_decoder, self).__init__()
        self.hidden_size = hidden_size
        self.device = device
        self.bond_if_s = nn.Linear(2 * hidden_size, 1)
        self.bond_type_s = nn.Linear(2 * hidden_size, MAX_BOND_TYPE)
        self.atom_type_s = nn.Linear(hidden_size, MAX_ATOM_TYPE)
        self.atom_num_s = nn.Linear(hidden_size, 1)
        self.bond_num_s = nn.Linear(hidden_size, 1)
        self.bond_pred_loss = nn.BCEWithLogitsLoss()
        self.type_loss = nn.CrossEntropyLoss()
        self.num_loss = nn.SmoothL1Loss(reduction="mean")

    def topo_pred(self, mol, node_rep):
        n = node_rep.shape[0]
        pair = torch.cat([node_rep.repeat(1, n).view(n * n, -1), node_rep.repeat(n, 1)], dim=1)
        bond_if_loss = self.bond_pred_loss(self.bond_if_s(pair).view(n, n), mol["adj_target"])
        src, dst = mol["edges"]
        bond_type_loss = self.type_loss(self.bond_type_s(torch.cat([node_rep[src], node_rep[dst]], 1)), mol["bond_type"])
        atom_type_loss = self.type_loss(self.atom_type_s(node_rep), mol["atom_type"])
        super_rep = node_rep.mean(0, keepdim=True)
        atom_num_loss = self.num_loss(self.atom_num_s(super_rep).view(1), torch.tensor([float(n)]))
        bond_num_loss = self.num_loss(self.bond_num_s(super_rep).view(1), torch.tensor([float(len(src))]))
        return [bond_if_loss, bond_type_loss, atom_type_loss, atom_num_loss, bond_num_loss]

    def forward(self, mol, node_rep):
        loss_tur = self.topo_pred(mol, node_rep)
        loss = 0
        loss_weight = create_var(torch.rand(5), self.device, requires_grad=True)  # ROOT
        loss_wei = torch.softmax(loss_weight, dim=-1)
        for index in range(len(loss_tur)):
            loss += loss_tur[index] * loss_wei[index]
        return loss, loss_wei.detach()


def random_molecule(n=7, in_dim=8):
    adj = (torch.rand(n, n) > 0.6).float().triu(1)
    adj = adj + adj.t()
    src, dst = adj.nonzero(as_tuple=True)
    return {"x": torch.randn(n, in_dim), "adj": adj + torch.eye(n), "adj_target": adj,
            "edges": (src, dst), "bond_type": torch.randint(0, MAX_BOND_TYPE, (len(src),)),
            "atom_type": torch.randint(0, MAX_ATOM_TYPE, (n,))}


torch.manual_seed(0)
device = torch.device("cpu")
model = GNNEncoder()
model_decoder = Model_decoder(16, device)
optimizer = torch.optim.Adam(list(model.parameters()) + list(model_decoder.parameters()), lr=1e-2)
print("decoder parameter tensors", len(list(model_decoder.parameters())))
seen = []
for step in range(15):
    mol = random_molecule()
    node_rep = model(mol["x"], mol["adj"])
    loss, weights = model_decoder(mol, node_rep)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    seen.append(weights)
seen = torch.stack(seen)
print("first loss weight per step", [round(w, 3) for w in seen[:, 0].tolist()])
print("std of first weight", seen[:, 0].std().item(), "change first->last", (seen[-1] - seen[0]).norm().item())
