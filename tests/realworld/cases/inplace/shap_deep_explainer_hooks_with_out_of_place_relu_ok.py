"""shap's PyTorch DeepExplainer (a forward hook and a full backward hook on every leaf module) on a ResNet-style model built the way the thread recommends: out-of-place ReLUs (`nn.ReLU()`) and the residual added with `out = out + identity`, so no hooked module output is modified in place and the DeepLIFT attributions are computed.

source: https://github.com/shap/shap/issues/3466
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu_out = nn.ReLU()

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = out + identity
        return self.relu_out(out)


class SmallResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.block = BasicBlock(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.block(self.stem(x)))))


def save_io(module, inputs, output):
    module.x, module.y = inputs[0].detach(), output.detach()


def deeplift_rescale(module, grad_input, grad_output):
    if not isinstance(module, nn.ReLU):
        return None
    half = module.x.shape[0] // 2
    delta_in = (module.x[:half] - module.x[half:]).repeat(2, *([1] * (module.x.dim() - 1)))
    delta_out = (module.y[:half] - module.y[half:]).repeat(2, *([1] * (module.y.dim() - 1)))
    rescaled = grad_output[0] * delta_out / delta_in.where(delta_in.abs() > 1e-6, torch.ones_like(delta_in))
    return (torch.where(delta_in.abs() > 1e-6, rescaled, grad_input[0]),)


class DeepExplainer:
    def __init__(self, model, background):
        self.model = model.eval()
        self.background = background

    def add_handles(self, module):
        children = list(module.children())
        if children:
            return [h for child in children for h in self.add_handles(child)]
        return [module.register_forward_hook(save_io), module.register_full_backward_hook(deeplift_rescale)]

    def shap_values(self, x, target):
        handles = self.add_handles(self.model)
        try:
            values = []
            for sample in x:
                tiled = sample.expand_as(self.background)
                joint = torch.cat([tiled, self.background]).requires_grad_()
                out = self.model(joint)[:, target].sum()
                (grad,) = torch.autograd.grad(out, joint)
                n = self.background.shape[0]
                values.append((grad[:n] * (tiled - self.background)).mean(0))
            return torch.stack(values)
        finally:
            for handle in handles:
                handle.remove()


def main():
    model = SmallResNet()
    background = torch.rand(6, 3, 8, 8)
    images = torch.rand(2, 3, 8, 8)
    explainer = DeepExplainer(model, background)
    values = explainer.shap_values(images, target=3)
    print("attribution shape:", tuple(values.shape), "sum:", round(values.sum().item(), 4))


if __name__ == "__main__":
    main()
