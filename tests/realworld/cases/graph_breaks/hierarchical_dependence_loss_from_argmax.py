"""Hierarchical classification: the dependence loss is built from argmax predictions, so beta changes nothing.

source: https://github.com/Ugenteraan/Deep_Hierarchical_Classification/issues/6
kind: bug
symptom: silent
verified: dloss.requires_grad is False; the weight updates are identical for beta=1 and beta=0
"""
import torch
import torch.nn as nn


class HierarchicalLossNetwork:
    def __init__(self, numeric_hierarchy, total_level=2, alpha=1, beta=1, p_loss=3):
        self.total_level, self.alpha, self.beta, self.p_loss = total_level, alpha, beta, p_loss
        self.numeric_hierarchy = numeric_hierarchy

    def check_hierarchy(self, current_level, previous_level):
        bool_tensor = [current_level[i].item() in self.numeric_hierarchy[previous_level[i].item()]
                       for i in range(previous_level.size()[0])]
        return torch.FloatTensor(bool_tensor)

    def calculate_lloss(self, predictions, true_labels):
        lloss = 0
        for l in range(self.total_level):
            lloss += nn.CrossEntropyLoss()(predictions[l], true_labels[l])
        return self.alpha * lloss

    def calculate_dloss(self, predictions, true_labels):
        dloss = 0
        for l in range(1, self.total_level):
            current_lvl_pred = torch.argmax(nn.Softmax(dim=1)(predictions[l]), dim=1)  # ROOT
            prev_lvl_pred = torch.argmax(nn.Softmax(dim=1)(predictions[l - 1]), dim=1)
            D_l = self.check_hierarchy(current_lvl_pred, prev_lvl_pred)
            l_prev = torch.where(prev_lvl_pred == true_labels[l - 1], 1.0, 0.)
            l_curr = torch.where(current_lvl_pred == true_labels[l], 1.0, 0.)
            dloss += torch.sum(-1 * torch.pow(self.p_loss, D_l * l_prev) * torch.pow(self.p_loss, D_l * l_curr))
        return self.beta * dloss


class HierarchicalNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 16)
        self.level_one, self.level_two = nn.Linear(16, 2), nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return [self.level_one(h), self.level_two(h)]


torch.manual_seed(0)
model = HierarchicalNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
HLN = HierarchicalLossNetwork({0: [0, 1], 1: [2, 3]})
x, sub = torch.randn(8, 6), torch.randint(0, 4, (8,))
labels = [sub // 2, sub]
prediction = model(x)
dloss = HLN.calculate_dloss(prediction, labels)
total_loss = HLN.calculate_lloss(prediction, labels) + dloss
optimizer.zero_grad()
total_loss.backward()
optimizer.step()
print("dloss requires grad:", torch.is_tensor(dloss) and dloss.requires_grad)
