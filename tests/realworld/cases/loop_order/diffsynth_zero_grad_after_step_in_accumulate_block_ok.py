"""DiffSynth-Studio's training runner after its fix: inside `with accelerator.accumulate(model):` the optimizer's `zero_grad()` comes after `optimizer.step()`, so on the syncing micro-step the step uses the gradients accumulated over the whole window and only then clears them.

source: https://github.com/modelscope/DiffSynth-Studio/pull/1404
kind: lookalike
"""
import copy
from contextlib import contextmanager

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class GradientState:
    def __init__(self, num_steps):
        self.num_steps = num_steps
        self.step = 0
        self.sync_gradients = True


class AcceleratedOptimizer:
    """Stand-in for accelerate's wrapper: zero_grad/step only act on sync steps."""

    def __init__(self, optimizer, gradient_state):
        self.optimizer = optimizer
        self.gradient_state = gradient_state

    def zero_grad(self):
        if self.gradient_state.sync_gradients:
            self.optimizer.zero_grad()

    def step(self):
        if self.gradient_state.sync_gradients:
            self.optimizer.step()


class Accelerator:
    def __init__(self, gradient_accumulation_steps):
        self.gradient_state = GradientState(gradient_accumulation_steps)

    def prepare(self, optimizer):
        return AcceleratedOptimizer(optimizer, self.gradient_state)

    @contextmanager
    def accumulate(self, model):
        state = self.gradient_state
        state.step += 1
        state.sync_gradients = state.step % state.num_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_state.num_steps).backward()


class DiffusionTrainingModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.denoiser = nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 8))

    def forward(self, batch):
        noise = batch["noise"]
        noisy = batch["latents"] + noise
        return nn.functional.mse_loss(self.denoiser(noisy), noise)


def launch_training_task(accelerator, model, optimizer, dataset, num_epochs=1):
    for _ in range(num_epochs):
        for data in dataset:
            with accelerator.accumulate(model):
                loss = model(data)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()


def main():
    model = DiffusionTrainingModule()
    reference = copy.deepcopy(model)
    lr, steps = 0.1, 4
    dataset = [{"latents": torch.randn(16, 8), "noise": torch.randn(16, 8)} for _ in range(steps)]

    grads = []
    for data in dataset:
        reference.zero_grad()
        reference(data).backward()
        grads.append(reference.denoiser[0].weight.grad.clone())
    mean_grad = torch.stack(grads).mean(0)
    before = model.denoiser[0].weight.detach().clone()

    accelerator = Accelerator(gradient_accumulation_steps=steps)
    optimizer = accelerator.prepare(torch.optim.SGD(model.parameters(), lr=lr))
    launch_training_task(accelerator, model, optimizer, dataset)

    applied = (before - model.denoiser[0].weight.detach()) / lr
    print("distance to window mean gradient:", round((applied - mean_grad).norm().item(), 4))
    print("distance to last micro-batch gradient / steps:", round((applied - grads[-1] / steps).norm().item(), 4))


if __name__ == "__main__":
    main()
