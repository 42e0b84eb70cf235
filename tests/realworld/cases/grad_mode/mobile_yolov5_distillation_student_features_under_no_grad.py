"""mobile-yolov5-pruning-distillation's train() computes the student's feature converters inside the same `with torch.no_grad():` block as the teacher's forward pass: s_f1/s_f2 = S_Converter_1/2(activation["s_f1"/"s_f2"]) are built without a graph, so compute_distillation_feature_loss adds a constant to the loss and the feature (hint) distillation never reaches the student; the README of the fix says the accuracy did not change because of this bug.

source: https://github.com/Syencil/mobile-yolov5-pruning-distillation/issues/83
kind: bug
symptom: silent
verified: the feature distillation loss has requires_grad False and adds nothing to the student's first conv weight gradient (difference 0.0); with the student feature maps taken outside no_grad (the fix, commit 01a0900) the hint loss changes that gradient by 0.6658 (norm)
"""
import torch
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1, g=1, act=True):  # ch_in, ch_out, kernel, stride, groups
        super(Conv, self).__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.LeakyReLU(0.1, inplace=True) if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


def compute_distillation_feature_loss(s_f, t_f, model, loss):
    h = model.hyp  # hyperparameters
    dl = torch.zeros(1)
    for s, t in zip(s_f, t_f):
        dl += nn.MSELoss(reduction="mean")(s, t)
    bs = s_f[0].shape[0]
    dl *= h['dist'] / 2
    loss += dl * bs
    return loss


torch.manual_seed(0)
model = nn.Sequential(Conv(3, 8, 3, 2), Conv(8, 16, 3, 2), nn.Conv2d(16, 6, 1))  # student (mobilenet) stand-in
model.hyp = {'dist': 1.0}
t_model = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), nn.Conv2d(32, 6, 1))  # teacher (yolov5s) stand-in
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
activation = {}
def get_activation(name):
    def hook(model, inputs, outputs):
        activation[name] = outputs
    return hook
hooks = [model[0].register_forward_hook(get_activation("s_f1")), model[1].register_forward_hook(get_activation("s_f2")),
         t_model[0].register_forward_hook(get_activation("t_f1")), t_model[1].register_forward_hook(get_activation("t_f2"))]
S_Converter_1, S_Converter_2 = Conv(8, 16, act=False), Conv(16, 32, act=False)
T_Converter_1, T_Converter_2 = Conv(16, 16, act=False), Conv(32, 32, act=False)

imgs = torch.randn(4, 3, 32, 32)
pred = model(imgs)
with torch.no_grad():
    t_pred = t_model(imgs)
    s_f1 = S_Converter_1(activation["s_f1"])  # ROOT
    s_f2 = S_Converter_2(activation["s_f2"])
    s_f = [s_f1, s_f2]
    t_f1 = T_Converter_1(activation["t_f1"])
    t_f2 = T_Converter_2(activation["t_f2"])
    t_f = [t_f1, t_f2]
loss = nn.functional.mse_loss(pred, t_pred)  # output distillation (compute_loss + compute_distillation_output_loss)
output_grad = torch.autograd.grad(loss, model[0].conv.weight, retain_graph=True)[0]
feature_loss = compute_distillation_feature_loss(s_f, t_f, model, torch.zeros(1))
loss = loss + feature_loss
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("feature loss requires grad:", feature_loss.requires_grad)
print("change of the student's conv gradient from the feature loss:", round((model[0].conv.weight.grad - output_grad).norm().item(), 4))
