"""A differentiable robot model keeps two sets of rigid bodies: the original `_bodies` module list and a newer `_bodies2` tree that `compute_forward_kinematics` walks. `make_link_param_learnable` swaps the link's fixed translation for a learnable module only on the `_bodies` copy, so the optimizer in `learn_link_lengths` holds the new parameters but the forward kinematics still read the constant URDF values: the end-effector loss has no path to any parameter and its `backward()` fails.

source: https://github.com/facebookresearch/differentiable-robot-model/commit/f6548dde7deeb98facbd834c0c36eb9bfb0a566f
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

URDF_LINKS = [  # name, parent, translation from the parent's frame (link length along x)
    ("base", None, [0.0, 0.0, 0.0]),
    ("upper_arm", "base", [0.0, 0.0, 0.0]),
    ("forearm", "upper_arm", [0.8, 0.0, 0.0]),
    ("hand", "forearm", [0.6, 0.0, 0.0]),
]
CONTROLLED = ["upper_arm", "forearm"]


class UnconstrainedTensor(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.param = nn.Parameter(0.5 * torch.ones(dim))

    def forward(self):
        return self.param


class RigidBody(nn.Module):
    def __init__(self, name, trans):
        super().__init__()
        self.name = name
        self.trans = torch.tensor(trans)
        self.children_bodies = []

    def translation(self):
        return self.trans() if isinstance(self.trans, nn.Module) else self.trans

    def forward_kinematics(self, q_dict, angle=None, origin=None, out=None):
        angle = torch.zeros(1) if angle is None else angle
        origin = torch.zeros(1, 3) if origin is None else origin
        out = {} if out is None else out
        t = self.translation()
        rotated = torch.stack([t[0] * torch.cos(angle) - t[1] * torch.sin(angle),
                               t[0] * torch.sin(angle) + t[1] * torch.cos(angle),
                               t[2].expand_as(angle)], dim=-1)
        position = origin + rotated
        out[self.name] = position
        joint = q_dict.get(self.name)
        child_angle = angle + joint if joint is not None else angle
        for child in self.children_bodies:
            child.forward_kinematics(q_dict, child_angle, position, out)
        return out


class DifferentiableRobotModel(nn.Module):
    def __init__(self, links=URDF_LINKS):
        super().__init__()
        self._bodies = nn.ModuleList(RigidBody(name, trans) for name, _, trans in links)
        self._name_to_idx_map = {name: i for i, (name, _, _) in enumerate(links)}
        self._bodies2 = {}
        for name, parent, trans in links:
            self._bodies2[name] = RigidBody(name, trans)
            if parent is None:
                self._root_body = self._bodies2[name]
            else:
                self._bodies2[parent].children_bodies.append(self._bodies2[name])

    def _get_parent_object_of_param(self, link_name):
        return self._bodies[self._name_to_idx_map[link_name]]  # ROOT

    def make_link_param_learnable(self, link_name, parameter_name, parametrization):
        parent_object = self._get_parent_object_of_param(link_name)
        parent_object.__delattr__(parameter_name)
        parent_object.add_module(parameter_name, parametrization)

    def compute_forward_kinematics(self, q, link_name):
        q_dict = {name: q[:, i] for i, name in enumerate(CONTROLLED)}
        return self._root_body.forward_kinematics(q_dict)[link_name]


def make_data(n=64):
    true_robot = DifferentiableRobotModel([(n_, p, [1.0, 0.0, 0.0] if n_ == "forearm" else t)
                                           for n_, p, t in URDF_LINKS])
    q = torch.rand(n, 2) * 3.0 - 1.5
    with torch.no_grad():
        return q, true_robot.compute_forward_kinematics(q, "hand")


def learn_link_lengths(robot, steps=20):
    q, ee_pos = make_data()
    optimizer = torch.optim.Adam(robot.parameters(), lr=0.05)
    for _ in range(steps):
        loss = nn.functional.mse_loss(robot.compute_forward_kinematics(q, "hand"), ee_pos)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    robot = DifferentiableRobotModel()
    robot.make_link_param_learnable("forearm", "trans", UnconstrainedTensor(3))
    print(f"learnable parameters: {sum(p.numel() for p in robot.parameters())}")
    print(f"final kinematics loss: {learn_link_lengths(robot):.4f}")


if __name__ == "__main__":
    main()
