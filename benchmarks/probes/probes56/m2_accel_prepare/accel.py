import copy
import torch


class Accelerator:
    def __init__(self, device="cpu", grad_accum=1):
        self.device = torch.device(device)
        self.grad_accum = grad_accum

    def prepare_model(self, model):
        wrapped = copy.deepcopy(model).to(self.device)  # ROOT
        wrapped.train()
        return wrapped

    def prepare(self, *objs):
        out = []
        for o in objs:
            out.append(self.prepare_model(o) if isinstance(o, torch.nn.Module) else o)
        return out[0] if len(out) == 1 else tuple(out)

    def backward(self, loss):
        (loss / self.grad_accum).backward()
