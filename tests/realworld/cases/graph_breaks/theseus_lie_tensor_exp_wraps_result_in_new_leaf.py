"""torchlie (theseus) builds the result of `SO3.exp` / `SE3.exp` with `_create_lie_tensor`, which was bound to the `LieTensor` constructor: `_make_subclass` makes a fresh leaf that does not require grad, so the rotation is cut from the tangent vector and optimizing the vector through the exponential map fails at backward.

source: https://github.com/facebookresearch/theseus/pull/631
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch


def _hat(omega):
    zero = torch.zeros_like(omega[..., 0])
    wx, wy, wz = omega[..., 0], omega[..., 1], omega[..., 2]
    return torch.stack([
        torch.stack([zero, -wz, wy], dim=-1),
        torch.stack([wz, zero, -wx], dim=-1),
        torch.stack([-wy, wx, zero], dim=-1),
    ], dim=-2)


class _SO3Type:
    def __repr__(self):
        return "SO3"

    def exp(self, tangent_vector):
        rotation = torch.linalg.matrix_exp(_hat(tangent_vector))
        return self._create_lie_tensor(rotation, self)

    def identity(self, batch_size):
        return LieTensor(torch.eye(3).expand(batch_size, 3, 3), self)


class LieTensor(torch.Tensor):
    def __new__(cls, data, ltype, requires_grad=False, _shared_memory=False):
        return cls._make_subclass(cls, data if _shared_memory else data.clone(), requires_grad)

    def __init__(self, data, ltype, requires_grad=None, _shared_memory=False):
        self.ltype = ltype

    @property
    def _t(self):
        return self.as_subclass(torch.Tensor)

    def local(self, other):
        """Difference of two rotations, as a matrix residual (g^-1 h - I)."""
        return self._t.transpose(-1, -2) @ other._t - torch.eye(3)

    @staticmethod
    def from_tensor(tensor, ltype):
        return _FromTensor.apply(tensor, ltype)


class _FromTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, ltype):
        return LieTensor(tensor, ltype, requires_grad=tensor.requires_grad, _shared_memory=True)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


SO3 = _SO3Type()
SO3._create_lie_tensor = LieTensor  # ROOT


def check_exp_optimizes(opt_tensor, target):
    opt = torch.optim.Adam([opt_tensor], lr=0.1)
    losses = []
    for i in range(5):
        opt.zero_grad()
        d = SO3.exp(opt_tensor).local(target)
        loss = torch.sum(d ** 2)
        losses.append(loss.item())
        loss.backward()  # SYMPTOM
        opt.step()
    return losses


torch.manual_seed(0)
vec = torch.randn((2, 3), requires_grad=True)
losses = check_exp_optimizes(vec, SO3.identity(2))
print("losses:", [round(v, 4) for v in losses])
print("loss decreased:", losses[-1] < losses[0])
