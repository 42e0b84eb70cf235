"""Shapes from the projects of docs/triage/unseen41.md (session 41), each in another spelling
than the project's and next to a buggy twin that is still reported; each runs on real torch."""
from __future__ import annotations

import sys
import textwrap

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # NigeloYang/federated_learning_differential_privacy (`pytorch/DIY/grad/auto_grad.py`): the
    # accuracy of a training loop read as `torch.argmax(model(x), dim=1).numpy()`. An integer
    # result never requires grad; GT116 followed `torch.argmax`'s argument as if its result
    # carried the graph. Look-alike: the class indices through NumPy (runs); twin: the
    # probabilities through NumPy (raises)
    "class-indices-of-the-output-through-numpy": (Shape("""
        model = nn.Linear(3, 2)
        x, y = torch.randn(4, 3), torch.zeros(4, dtype=torch.long)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            scores = model(x)
            labels = torch.argmax(scores, dim=1)
            acc = np.mean(labels.numpy() == y.numpy())
        """, "GT116"), Shape("""
        model = nn.Linear(3, 2)
        x, y = torch.randn(4, 3), torch.zeros(4, dtype=torch.long)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            scores = model(x)
            probs = torch.softmax(scores, dim=1)
            acc = np.mean(probs.numpy()[:, 0])
        """, "GT116", line=11, raises=(RuntimeError, "requires grad"))),
    # Atcold/pytorch-PPUU (`map_i80.py`, the environment's `step`): the policy's action
    # un-normalised in place with NumPy's ufuncs, `np.multiply(a, std, a)` and `np.add(a, mean,
    # a)`: the third positional argument is `out`, so the array is updated. GT708 read them
    # as results thrown away. Look-alike: `out` given positionally (the array changes);
    # twin: no `out` (the array is left as it was)
    "numpy-ufunc-with-out-given-positionally": (Shape("""
        class Env:
            def __init__(self):
                self.std, self.mean = np.full(2, 2.0), np.ones(2)
            def step(self, action=None):
                if action is not None:
                    np.multiply(action, self.std, action)
                    np.add(action, self.mean, action)
                    np.sqrt(action, action)
                return action
        act = np.array([4.0, 0.0])
        Env().step(act)
        """, "GT708", holds="np.allclose(act, [3.0, 1.0])"), Shape("""
        class Env:
            def __init__(self):
                self.std, self.mean = np.full(2, 2.0), np.ones(2)
            def step(self, action=None):
                if action is not None:
                    np.multiply(action, self.std)
                    action += self.mean
                return action
        act = np.array([4.0, 0.0])
        Env().step(act)
        """, "GT708", line=6, holds="np.allclose(act, [5.0, 1.0])")),
    # bilzard/kaggle-hms-public (`run/batch_infer.py`): a `match` statement in a file that
    # builds an optimizer. GT411's search for optimizer calls walked a `match`'s cases as
    # statements and crashed (GT002, GT411 and GT421 not run on the file). Look-alike: the
    # memory is a Parameter; twin: a plain tensor handed to the optimizer inside a case
    "optimizer-built-in-a-match-case": (Shape("""
        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.memory = nn.Parameter(torch.randn(3, 4))
            def forward(self, x):
                return self.fc(x) @ self.memory.t()
        model = Memory()
        phase = "train"
        match phase:
            case "train":
                opt = torch.optim.SGD(list(model.parameters()) + [model.memory], lr=0.1)
            case _:
                opt = None
        before = model.memory.detach().clone()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        """, "GT411", holds="not torch.equal(before, model.memory)"), Shape("""
        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.memory = torch.randn(3, 4)
            def forward(self, x):
                return self.fc(x) @ self.memory.t()
        model = Memory()
        phase = "train"
        match phase:
            case "train":
                opt = torch.optim.SGD(list(model.parameters()) + [model.memory], lr=0.1)
            case _:
                opt = None
        before = model.memory.detach().clone()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        """, "GT411", line=5, holds="torch.equal(before, model.memory)")),
    # kfallah/manifold-contrastive (`notebooks/transop_ssl.ipynb`): a checkpoint's entry
    # replaced by its transpose, `sd["model_state"]["...psi"] = sd[...]["...psi"].transpose(0,
    # 1)`, after `sd = torch.load(...)`. A string key indexes a mapping, and `torch.load` hands
    # back what was saved: the entry is rebound, no memory is written. GT620 took the load for
    # a tensor factory. Look-alike: the loaded dict's entry (runs); twin: a tensor's own row
    "checkpoint-entry-replaced-by-its-transpose": (Shape("""
        import io
        buf = io.BytesIO()
        torch.save({"model": {"psi": torch.randn(3, 4)}}, buf)
        buf.seek(0)
        state = torch.load(buf)
        state["model"]["psi"] = state["model"]["psi"].transpose(0, 1)
        """, "GT620", holds="state['model']['psi'].shape == (4, 3)"), Shape("""
        out = torch.randn(2, 3, 3)
        out[1] = out[1].transpose(-2, -1)
        """, "GT620", line=2, raises=(RuntimeError, "single memory location"))),
    # lmriccardo/few-shot-graph-classification (`mevolve.py`): a threshold fitted by gradient
    # descent against `g_values = g_function()`, computed once before the loop by a function
    # nested in the method that returns `torch.tensor(preds) - torch.tensor(labels)`: data
    # without a graph (NOTE [graphless data]). GT507 took the call for a module's. Look-alike:
    # the nested function returns data (runs); twin: it returns the model's output (raises)
    "nested-helper-returning-data-before-the-loop": (Shape("""
        model = nn.Linear(3, 2)
        x, y = torch.randn(6, 3), torch.randint(0, 2, (6,))
        def fit(theta, steps=3):
            def g_function():
                preds, labels = [], []
                for i, row in enumerate(model(x)):
                    labels.append(y[i].item())
                    preds.append(row.argmax().item())
                result = torch.tensor(preds) - torch.tensor(labels)
                result[result == 0] = 1
                return result
            g_values = g_function()
            opt = torch.optim.SGD([theta], lr=0.1)
            for step in range(steps):
                f = torch.tanh(theta * g_values).sum()
                opt.zero_grad()
                f.backward()
                opt.step()
            return theta
        fit(torch.zeros(1, requires_grad=True))
        """, "GT507"), Shape("""
        model = nn.Linear(3, 2)
        x, y = torch.randn(6, 3), torch.randint(0, 2, (6,))
        def fit(theta, steps=3):
            def g_function():
                return model(x)[:, 0]
            g_values = g_function()
            opt = torch.optim.SGD([theta], lr=0.1)
            for step in range(steps):
                f = torch.tanh(theta * g_values).sum()
                opt.zero_grad()
                f.backward()
                opt.step()
            return theta
        fit(torch.zeros(1, requires_grad=True))
        """, "GT507", line=6, raises=(RuntimeError, "backward through the graph a second"))),
    # Atcold/pytorch-PPUU (`models.py`, the policies' `forward`): `if normalize_outputs: a =
    # a.data; a *= std; a += mean` with `normalize_outputs=False` by default, asked for only by
    # the evaluation script. GT105 read the `.data` as a cut of the returned action. Look-alike:
    # the opt-in mode (trains); twin: the mode on by default (raises in training)
    "data-in-an-opt-in-output-mode": (Shape("""
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)
                self.register_buffer("std", torch.full((2,), 2.0))
            def forward(self, x, normalize_outputs=False):
                a = self.fc(x)
                if normalize_outputs:
                    a = a.data
                    a *= self.std
                return a
        policy = Policy()
        policy(torch.randn(4, 3)).pow(2).mean().backward()
        with torch.no_grad():
            act = policy(torch.randn(1, 3), normalize_outputs=True)
        """, "GT105", holds="policy.fc.weight.grad is not None"), Shape("""
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)
                self.register_buffer("std", torch.full((2,), 2.0))
            def forward(self, x, normalize_outputs=True):
                a = self.fc(x)
                if normalize_outputs:
                    a = a.data
                    a *= self.std
                return a
        policy = Policy()
        policy(torch.randn(4, 3)).pow(2).mean().backward()
        """, "GT105", line=9, raises=(RuntimeError, "does not require grad"))),
    # lmriccardo/few-shot-graph-classification (`asmaml.py`, AS-MAML): the query accuracy
    # computed under `torch.no_grad()` (`softmax(logits).argmax(1)`, `.item()`) weights the
    # stop gate's log-probability, REINFORCE-style, and is added to the loss as a constant.
    # GT108 read the argmax as the loss's cut. Look-alike: the accuracy under no_grad (trains);
    # twin: a loss made of the argmax alone (raises)
    "accuracy-under-no-grad-as-a-reward": (Shape("""
        model, gate = nn.Linear(3, 2), nn.Linear(3, 1)
        opt = torch.optim.SGD(list(model.parameters()) + list(gate.parameters()), lr=0.1)
        x, y = torch.randn(8, 3), torch.randint(0, 2, (8,))
        for step in range(2):
            logits = model(x)
            ce = F.cross_entropy(logits, y)
            stop = torch.sigmoid(gate(x)).mean()
            with torch.no_grad():
                pred = F.softmax(logits, dim=1).argmax(dim=1)
                acc = (pred == y).float().mean().item()
            loss = ce - torch.log(stop) * acc + acc
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT108"), Shape("""
        model = nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(8, 3), torch.randint(0, 2, (8,))
        for step in range(2):
            logits = model(x)
            pred = F.softmax(logits, dim=1).argmax(dim=1)
            loss = 1 - (pred == y).float().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT108", line=6, raises=(RuntimeError, "does not require grad"))),
    # skanjalkar/Nerf-SFM-P3 (`Phase2/customNerf/train.py`): `runNerfModel` runs the model on
    # the ray points chunk by chunk, `predictions.append(model(batch))`, and renders their
    # `torch.cat`; the training loop backpropagates the MSE of what it returns. GT505 read the
    # collection as an evaluation's leak (NOTE [step forward]). Look-alike: the step's forward
    # (trains); twin: the same helper run only to measure, its results kept over the batches
    "chunked-forward-of-a-training-step": (Shape("""
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def run_model(points, chunk):
            batches = [points[i:i + chunk] for i in range(0, len(points), chunk)]
            predictions = []
            for batch in batches:
                predictions.append(model(batch))
            return torch.cat(predictions, dim=0)
        for it in range(2):
            rgb = run_model(torch.randn(8, 3), 3)
            loss = F.mse_loss(rgb, torch.zeros(8, 1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT505", holds="model.weight.grad is not None"), Shape("""
        model = nn.Linear(3, 1)
        def run_model(points, chunk):
            batches = [points[i:i + chunk] for i in range(0, len(points), chunk)]
            predictions = []
            for batch in batches:
                predictions.append(model(batch))
            return torch.cat(predictions, dim=0)
        scores = []
        for it in range(2):
            scores.append(run_model(torch.randn(8, 3), 3).mean())
        """, "GT505", line=6, holds="scores[-1].grad_fn is not None")),
    # sarphiv/nerf-experiments (`garf/model_camera_calibration.py`): `_get_logging_losses`
    # adds a pose error, the root of a sum of squared differences, to the dict the steps hand
    # straight to `self.log_dict(...)` after backpropagating their loss: a logged value. GT753
    # took the helper for trained (it is called in `training_step`). Look-alike: logged only
    # (runs); twin: the step adds the pose error to its loss (NaN gradients at coincidence)
    "distance-in-a-logged-dict": (Shape("""
        class Calib(nn.Module):
            def __init__(self):
                super().__init__()
                self.pose, self.fc = nn.Parameter(torch.zeros(4, 3)), nn.Linear(3, 3)
            def log_dict(self, d):
                self.logged = {k: float(v) for k, v in d.items()}
            def _get_logging_losses(self, stage, loss):
                pose_error = (((self.pose - torch.zeros(4, 3)) ** 2).sum(dim=1) ** 0.5).mean()
                return {f"{stage}_loss": loss, f"{stage}_pose_error": pose_error}
            def training_step(self, x):
                loss = self.fc(x).pow(2).mean()
                loss.backward()
                self.log_dict(self._get_logging_losses("train", loss))
                return loss
        m = Calib()
        m.training_step(torch.randn(2, 3))
        """, "GT753", holds="m.logged['train_pose_error'] == 0.0"), Shape("""
        class Calib(nn.Module):
            def __init__(self):
                super().__init__()
                self.pose, self.fc = nn.Parameter(torch.zeros(4, 3)), nn.Linear(3, 3)
            def log_dict(self, d):
                self.logged = {k: float(v) for k, v in d.items()}
            def _get_logging_losses(self, stage, loss):
                pose_error = (((self.pose - torch.zeros(4, 3)) ** 2).sum(dim=1) ** 0.5).mean()
                return {f"{stage}_loss": loss, f"{stage}_pose_error": pose_error}
            def training_step(self, x):
                loss = self.fc(x).pow(2).mean()
                losses = self._get_logging_losses("train", loss)
                (loss + losses["train_pose_error"]).backward()
                return loss
        m = Calib()
        m.training_step(torch.randn(2, 3))
        """, "GT753", line=8, holds="torch.isnan(m.pose.grad).all()")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_no_internal_error_on_a_match_statement() -> None:
    """A `match` in a file building an optimizer crashed GT411 and GT421 (GT002): every rule."""
    source = PRELUDE + textwrap.dedent(SHAPES["optimizer-built-in-a-match-case"][1].src)
    assert not [f for f in check_source(source, "shape.py") if f.code == "GT002"]


# sinoyou/Trajectory-Prediction-On-Vehicle (`model/utils.py`): `l2_loss` returns the root of a
# sum of squared differences; the project's other files call it only to measure the
# displacement error of an evaluation, never backpropagate it. GT753 took it for a loss by its
# name (NOTE [loss evidence], read by `numerics._ops.in_training` for a function named like a
# loss). Look-alike: another file measures with it (runs); twin: another file backpropagates
# it when the prediction equals the target (NaN gradients)
L2 = '''
import torch
import torch.nn as nn

def l2_loss(pred, gt):
    return torch.sqrt(torch.sum((gt - pred) ** 2, dim=-1))

model = nn.Linear(2, 2)
nn.init.zeros_(model.weight)
nn.init.zeros_(model.bias)
'''


def _project(tmp_path, user: str):  # type: ignore[no-untyped-def]
    import runpy
    path = tmp_path / "utils.py"
    path.write_text(L2)
    run = tmp_path / "runner.py"
    run.write_text("import sys\nsys.path.insert(0, %r)\n" % str(tmp_path)
                   + "import torch\nfrom utils import l2_loss, model\n"
                   "x, y = torch.randn(4, 2), torch.zeros(4, 2)\n" + user)

    def execute():  # type: ignore[no-untyped-def]
        try:
            return runpy.run_path(str(run))
        finally:  # the next test's own `utils` must not find this one imported
            while str(tmp_path) in sys.path:
                sys.path.remove(str(tmp_path))
            sys.modules.pop("utils", None)
    return path, execute


def test_root_distance_measured_in_another_file_is_silent(tmp_path) -> None:
    path, run = _project(tmp_path, "with torch.no_grad():\n    out = {'y_hat': model(x)}\n"
                                   "err = l2_loss(out['y_hat'], y).mean().item()\n")
    assert _codes(path, "GT753") == []
    run()


def test_root_distance_backpropagated_in_another_file_is_reported(tmp_path) -> None:
    path, run = _project(tmp_path, "l2_loss(model(x), y).mean().backward()\n"
                                   "assert torch.isnan(model.weight.grad).all()\n")
    assert _codes(path, "GT753") == [6]
    run()


def _codes(path, code: str) -> list[int]:  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    return [f.line for f in check_paths([str(path)], Settings()).findings if f.code == code]


# gmum/few-shot-hypernets-public (`hypernet_kernel.py`, `test_loop`): `scores, params =
# self.set_forward(x)` where `set_forward` returns `..., params` bound to a method returning a
# dict literal of `np.concatenate` results (the Bayesian weights' statistics), the entry
# appended on every test batch. GT505 took the entry for a graph: the call's first element
# carries one (NOTE [returned arrays]). The base class comes from the project's package.
# Look-alike: the dict holds arrays (runs); twin: it holds the classifier's output
TEMPLATES = '''
import copy
import torch.nn as nn


class Bayes(nn.Linear):
    @property
    def weight_mu(self):
        return self.weight


class MetaTemplate(nn.Module):
    def __init__(self):
        super().__init__()
        self.net, self.samples = Bayes(3, 2), 2

    def parse_feature(self, x):
        return x, x

    def generate_target_net(self, support):
        return copy.deepcopy(self.net), None
'''
HYPER = '''
import numpy as np
import torch
from methods.templates import MetaTemplate


class HyperShot(MetaTemplate):
    def set_forward(self, x):
        support, query = self.parse_feature(x)
        classifier, _ = self.generate_target_net(support)
        params = self.histogram(classifier, query)
        preds = []
        for sample in range(self.samples):
            preds.append(classifier(query))
        return torch.stack(preds).mean(dim=0), params

    def histogram(self, classifier, query):
        mu = []
        for module in [classifier]:
            mu.append(module.weight_mu.clone().data.cpu().numpy().flatten())
        mu = np.concatenate(mu)
        return {"mu_weight": STAT}

    def test_loop(self, test_loader):
        collected = {"mu_weight": []}
        for i, (x, _) in enumerate(test_loader):
            try:
                scores, params, metrics = self.set_forward_with_adaptation(x)
            except AttributeError:
                scores, params = self.set_forward(x)
                collected["mu_weight"].append(params["mu_weight"])
        return collected


out = HyperShot().test_loop([(torch.randn(2, 3), 0) for _ in range(3)])
'''


def _hyper(tmp_path, stat: str):  # type: ignore[no-untyped-def]
    import runpy
    import sys
    (tmp_path / "methods").mkdir()
    (tmp_path / "methods" / "__init__.py").write_text("")
    (tmp_path / "methods" / "templates.py").write_text(TEMPLATES)
    path = tmp_path / "hyper.py"
    path.write_text(HYPER.replace("STAT", stat))
    sys.path.insert(0, str(tmp_path))
    try:
        return path, runpy.run_path(str(path))["out"]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("methods.templates", None)
        sys.modules.pop("methods", None)


def test_array_statistics_unpacked_from_a_method_are_silent(tmp_path) -> None:
    import numpy as np
    path, out = _hyper(tmp_path, "mu")
    assert all(isinstance(a, np.ndarray) for a in out["mu_weight"])
    assert _codes(path, "GT505") == []


def test_layer_output_unpacked_from_a_method_is_reported(tmp_path) -> None:
    path, out = _hyper(tmp_path, "classifier(query).mean(0)")
    assert all(t.grad_fn is not None for t in out["mu_weight"])
    assert _codes(path, "GT505") == [31]
