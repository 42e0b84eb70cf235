"""ThreeLayerNet builds its Linear layers inside forward(), so list(model.parameters()) is empty.

source: https://github.com/pytorch/pytorch/issues/1291
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch


class ThreeLayerNet(torch.nn.Module):
    def __init__(self, D_in, H, D_out):
        super(ThreeLayerNet, self).__init__()
        self.D_in, self.H, self.D_out = D_in, H, D_out

    def forward(self, x):
        h_relu = torch.nn.Linear(self.D_in, self.H)(x).clamp(min=0)  # ROOT
        h_relu = torch.nn.Linear(self.H, self.H)(h_relu).clamp(min=0)
        y_pred = torch.nn.Linear(self.H, self.D_out)(h_relu)
        return y_pred


torch.manual_seed(0)
D_in, H, D_out = 10, 8, 2
model = ThreeLayerNet(D_in, H, D_out)
x, y = torch.randn(4, D_in), torch.randn(4, D_out)
print(list(model.parameters()))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)  # SYMPTOM
loss = torch.nn.functional.mse_loss(model(x), y)
loss.backward()
optimizer.step()
