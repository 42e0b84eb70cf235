"""Loss_ToolBox's MultiTverskyLoss builds a `FocalBinaryTverskyLoss` per class and calls the instance, `loss_func(input_idx, target_idx)`: the loss is an old-style autograd Function (an `__init__` holding alpha/beta/gamma, non-static `forward` and `backward`), which current PyTorch refuses to run, so the first training step of a segmentation network with this loss fails.

source: https://github.com/Hsuxu/Loss_ToolBox-PyTorch/commit/f9ce2bd353fdee914cf822429923f4b4cbb7b320
kind: bug
symptom: crash
verified: Legacy autograd function with non-static forward method is deprecated
"""
import torch
import torch.nn as nn
from torch.autograd import Function

torch.manual_seed(0)


class FocalBinaryTverskyLoss(Function):

    def __init__(ctx, alpha=0.5, beta=0.5, gamma=1.0, reduction='mean'):
        ctx.alpha = alpha
        ctx.beta = beta
        ctx.epsilon = 1e-6
        ctx.reduction = reduction
        ctx.gamma = gamma
        s = ctx.beta + ctx.alpha
        if sum != 1:
            ctx.beta = ctx.beta / s
            ctx.alpha = ctx.alpha / s

    # @staticmethod
    def forward(ctx, input, target):
        batch_size = input.size(0)
        _, input_label = input.max(1)

        input_label = input_label.float()
        target_label = target.float()

        ctx.save_for_backward(input, target_label)

        input_label = input_label.view(batch_size, -1)
        target_label = target_label.view(batch_size, -1)

        ctx.P_G = torch.sum(input_label * target_label, 1)  # TP
        ctx.P_NG = torch.sum(input_label * (1 - target_label), 1)  # FP
        ctx.NP_G = torch.sum((1 - input_label) * target_label, 1)  # FN

        index = ctx.P_G / (ctx.P_G + ctx.alpha * ctx.P_NG + ctx.beta * ctx.NP_G + ctx.epsilon)
        loss = torch.pow((1 - index), 1 / ctx.gamma)
        # target_area = torch.sum(target_label, 1)
        # loss[target_area == 0] = 0
        if ctx.reduction == 'none':
            loss = loss
        elif ctx.reduction == 'sum':
            loss = torch.sum(loss)
        else:
            loss = torch.mean(loss)
        return loss

    # @staticmethod
    def backward(ctx, grad_out):
        inputs, target = ctx.saved_tensors
        inputs = inputs.float()
        target = target.float()
        batch_size = inputs.size(0)
        sum = ctx.P_G + ctx.alpha * ctx.P_NG + ctx.beta * ctx.NP_G + ctx.epsilon
        P_G = ctx.P_G.view(batch_size, 1, 1, 1, 1)
        if inputs.dim() == 5:
            sum = sum.view(batch_size, 1, 1, 1, 1)
        elif inputs.dim() == 4:
            sum = sum.view(batch_size, 1, 1, 1)
            P_G = ctx.P_G.view(batch_size, 1, 1, 1)
        sub = (ctx.alpha * (1 - target) + target) * P_G

        dL_dT = (1 / ctx.gamma) * torch.pow((P_G / sum), (1 / ctx.gamma - 1))
        dT_dp0 = -2 * (target / sum - sub / sum / sum)
        dL_dp0 = dL_dT * dT_dp0

        dT_dp1 = ctx.beta * (1 - target) * P_G / sum / sum
        dL_dp1 = dL_dT * dT_dp1
        grad_input = torch.cat((dL_dp1, dL_dp0), dim=1)
        # grad_input = torch.cat((grad_out.item() * dL_dp0, dL_dp0 * grad_out.item()), dim=1)
        return grad_input, None


class MultiTverskyLoss(nn.Module):
    """
    Tversky Loss for segmentation adaptive with multi class segmentation
    """

    def __init__(self, alpha=0.5, beta=0.5, gamma=1.0, weights=None):
        super(MultiTverskyLoss, self).__init__()
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.weights = weights

    def forward(self, inputs, targets):

        num_class = inputs.size(1)
        weight_losses = 0.0
        if self.weights is not None:
            assert len(self.weights) == num_class, 'number of classes should be equal to length of weights '
            weights = self.weights
        else:
            weights = [1.0 / num_class] * num_class
        input_slices = torch.split(inputs, [1] * num_class, dim=1)
        for idx in range(num_class):
            input_idx = input_slices[idx]
            input_idx = torch.cat((1 - input_idx, input_idx), dim=1)
            target_idx = (targets == idx) * 1
            loss_func = FocalBinaryTverskyLoss(self.alpha, self.beta, self.gamma)
            loss_idx = loss_func(input_idx, target_idx)  # ROOT
            weight_losses+=loss_idx * weights[idx]
        # loss = torch.Tensor(weight_losses)
        # loss = loss.to(inputs.device)
        # loss = torch.sum(loss)
        return weight_losses


class SegNet(nn.Module):
    def __init__(self, num_class=3):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, num_class, 1))

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


model = SegNet()
criterion = MultiTverskyLoss(alpha=0.5, beta=0.5, gamma=1.0)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
weight_before = model.net[0].weight.detach().clone()
for step in range(5):
    images = torch.randn(4, 1, 16, 16)
    targets = torch.randint(0, 3, (4, 1, 16, 16))
    loss = criterion(model(images), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: tversky loss {loss.item():.4f}")
print("first conv changed:", not torch.equal(weight_before, model.net[0].weight))
