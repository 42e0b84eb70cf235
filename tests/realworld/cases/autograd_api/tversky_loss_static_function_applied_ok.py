"""Loss_ToolBox after its autograd fix of the Tversky loss: `FocalBinaryTverskyLoss` is a new-style autograd Function (a static `forward` with the coefficients as constants, the hand-written backward kept) and MultiTverskyLoss calls it through `loss_func.apply(input_idx, target_idx)`, so the per-class losses are built, backpropagated through the custom backward, and the segmentation network trains.

source: https://github.com/Hsuxu/Loss_ToolBox-PyTorch/commit/f9ce2bd353fdee914cf822429923f4b4cbb7b320
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.autograd import Function

torch.manual_seed(0)


class FocalBinaryTverskyLoss(Function):

    @staticmethod
    def forward(ctx, input, target):
        _alpha = 0.5
        _beta = 0.5
        _gamma = 1.0
        _epsilon = 1e-6
        _reduction = 'mean'

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

        index = ctx.P_G / (ctx.P_G + _alpha * ctx.P_NG + _beta * ctx.NP_G + _epsilon)
        loss = torch.pow((1 - index), 1 / _gamma)
        # target_area = torch.sum(target_label, 1)
        # loss[target_area == 0] = 0
        if _reduction == 'none':
            loss = loss
        elif _reduction == 'sum':
            loss = torch.sum(loss)
        else:
            loss = torch.mean(loss)
        return loss

    # @staticmethod
    def backward(ctx, grad_out):
        _alpha = 0.5
        _beta = 0.5
        _gamma = 1.0
        _epsilon = 1e-6

        inputs, target = ctx.saved_tensors
        inputs = inputs.float()
        target = target.float()
        batch_size = inputs.size(0)
        sum = ctx.P_G + _alpha * ctx.P_NG + _beta * ctx.NP_G + _epsilon
        P_G = ctx.P_G.view(batch_size, 1, 1, 1, 1)
        if inputs.dim() == 5:
            sum = sum.view(batch_size, 1, 1, 1, 1)
        elif inputs.dim() == 4:
            sum = sum.view(batch_size, 1, 1, 1)
            P_G = ctx.P_G.view(batch_size, 1, 1, 1)
        sub = (_alpha * (1 - target) + target) * P_G

        dL_dT = (1 / _gamma) * torch.pow((P_G / sum), (1 / _gamma - 1))
        dT_dp0 = -2 * (target / sum - sub / sum / sum)
        dL_dp0 = dL_dT * dT_dp0

        dT_dp1 = _beta * (1 - target) * P_G / sum / sum
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
            loss_idx = loss_func.apply(input_idx, target_idx)
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
