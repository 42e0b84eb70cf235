"""A network whose output is a derivative (the gradient of a learned scalar potential with respect to the input, taken with `torch.autograd.grad` inside `forward`) is trained with a small Lightning-style trainer; the trainer's validation loop switches autograd off globally with `torch.set_grad_enabled(False)` to save memory, so the first validation batch cannot differentiate the potential and the run stops.

source: https://github.com/Lightning-AI/pytorch-lightning/issues/4487
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch


class Feedforward(torch.nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.fc1 = torch.nn.Linear(input_size, hidden_size)
        self.act = torch.nn.Tanh()
        self.fc2 = torch.nn.Linear(hidden_size, 1)

    def forward(self, x):
        potential = self.fc2(self.act(self.fc1(x))).sum()
        grad = torch.autograd.grad(outputs=potential, inputs=x, retain_graph=True, create_graph=True)  # SYMPTOM
        return grad[0]


class GradientModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Feedforward(3, 32)

    def training_step(self, batch):
        x, target = batch
        return torch.nn.functional.mse_loss(self.net(x), target)

    def validation_step(self, batch):
        x, target = batch
        return torch.nn.functional.mse_loss(self.net(x), target).item()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


class MiniTrainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, train_batches, val_batches):
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            module.train()
            for batch in train_batches:
                loss = module.training_step(batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            val_loss = self.validate(module, val_batches)
            print("epoch %d train %.4f val %.4f" % (epoch, loss.item(), val_loss))

    def validate(self, module, val_batches):
        module.eval()
        # disable gradients to save memory
        torch.set_grad_enabled(False)  # ROOT
        losses = [module.validation_step(batch) for batch in val_batches]
        torch.set_grad_enabled(True)
        return sum(losses) / len(losses)


def make_batches(n, seed):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        x = torch.rand((10, 3), generator=g).requires_grad_(True)
        batches.append((x, 2 * x.detach()))  # gradient of sum(x ** 2)
    return batches


torch.manual_seed(0)
MiniTrainer(max_epochs=3).fit(GradientModule(), make_batches(8, 0), make_batches(2, 1))
