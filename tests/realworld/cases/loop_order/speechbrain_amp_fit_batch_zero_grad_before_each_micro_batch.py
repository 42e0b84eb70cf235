"""SpeechBrain's Brain.fit_batch calls `self.optimizer.zero_grad()` at the start of every batch on the mixed-precision path, also on the batches that only accumulate (`should_step` False): with grad_accumulation_factor 4 the gradients of the first three batches are erased and each optimizer step uses a quarter of the last batch's gradient.

source: https://github.com/speechbrain/speechbrain/pull/1739
kind: bug
symptom: silent
verified: at each optimizer step the gradient equals the last batch's gradient / 4 (relative error against the accumulated gradient about 0.9; 0.0 with the fix)
"""
from contextlib import contextmanager

import torch


class Brain:  # speechbrain.core.Brain reduced to the training loop of fit() and fit_batch()
    def __init__(self, modules, opt_class, grad_accumulation_factor=1, auto_mix_prec=False):
        self.modules = torch.nn.ModuleDict(modules)
        self.optimizer = opt_class(self.modules.parameters())
        self.grad_accumulation_factor = grad_accumulation_factor
        self.auto_mix_prec = auto_mix_prec
        self.scaler = torch.amp.GradScaler("cpu", enabled=auto_mix_prec)
        self.step = 0
        self.optimizer_step = 0

    @contextmanager
    def no_sync(self, use=True):
        yield  # single process: nothing to synchronize

    def check_gradients(self, loss):
        return bool(torch.isfinite(loss))

    def fit_batch(self, batch):
        should_step = self.step % self.grad_accumulation_factor == 0
        # Managing automatic mixed precision
        if self.auto_mix_prec:
            self.optimizer.zero_grad()  # ROOT
            with torch.autocast("cpu", dtype=torch.bfloat16):
                outputs = self.compute_forward(batch)
                loss = self.compute_objectives(outputs, batch)
            with self.no_sync(not should_step):
                self.scaler.scale(
                    loss / self.grad_accumulation_factor
                ).backward()
            if should_step:
                self.scaler.unscale_(self.optimizer)
                if self.check_gradients(loss):
                    self.scaler.step(self.optimizer)
                self.scaler.update()
                self.optimizer_step += 1
        else:
            outputs = self.compute_forward(batch)
            loss = self.compute_objectives(outputs, batch)
            with self.no_sync(not should_step):
                (loss / self.grad_accumulation_factor).backward()
            if should_step:
                if self.check_gradients(loss):
                    self.optimizer.step()
                self.optimizer.zero_grad()
                self.optimizer_step += 1
        return loss.detach().cpu()

    def fit(self, train_set, epochs=1):
        for epoch in range(epochs):
            self.modules.train()
            for batch in train_set:
                self.step += 1
                self.fit_batch(batch)
            self.step = 0


class SpkBrain(Brain):
    def compute_forward(self, batch):
        return self.modules["model"](batch[0])

    def compute_objectives(self, outputs, batch):
        return torch.nn.functional.cross_entropy(outputs.float(), batch[1])

    # measurement only: the gradient the step is about to use, against the window's accumulated gradient
    def check_gradients(self, loss):
        window = self.batches[self.step - self.grad_accumulation_factor:self.step]
        params = list(self.modules.parameters())
        expected = [torch.zeros_like(p) for p in params]
        for batch in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                ref_loss = self.compute_objectives(self.compute_forward(batch), batch)
            for e, g in zip(expected, torch.autograd.grad(ref_loss / self.grad_accumulation_factor, params)):
                e += g
        got = torch.cat([p.grad.reshape(-1) for p in params])
        want = torch.cat([e.reshape(-1) for e in expected])
        print(f"step {self.step}: |grad - accumulated| / |accumulated| = {((got - want).norm() / want.norm()).item():.3f}")
        return super().check_gradients(loss)


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(24, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
brain = SpkBrain({"model": model}, lambda params: torch.optim.Adam(params, lr=1e-3),
                 grad_accumulation_factor=4, auto_mix_prec=True)
brain.batches = [(torch.randn(8, 24), torch.randint(0, 5, (8,))) for _ in range(8)]
brain.fit(brain.batches)
