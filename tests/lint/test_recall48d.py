"""GT303 across a call: a flag set on a parameter whose callers pass a non-leaf tensor."""
import textwrap

from gradtrace.lint import check_source


def _gt303(src):
    return [f.line for f in check_source(textwrap.dedent(src), select=["GT303"])]


BUGGY = """
    import torch

    def prepare(x, scale):
        x.requires_grad = True
        return x * scale

    def attack(scale):
        w = torch.randn(3, requires_grad=True)
        adv = w * 2
        return prepare(adv, scale)

    class Explainer:
        def mark(self, inp):
            inp.requires_grad = True
            return inp

        def explain(self, inp):
            return self.mark(inp)

        def run(self, size):
            w = torch.zeros(size, requires_grad=True)
            noisy = w + 1.0
            return self.explain(noisy)

    attack(2.0)
    Explainer().run(3)
    """


def test_flag_on_parameter_fed_a_non_leaf_is_reported():
    assert _gt303(BUGGY) == [5, 15]


def test_flag_on_parameter_fed_a_leaf_stays_silent():
    leaf = BUGGY.replace("adv = w * 2", "adv = (w * 2).detach()")
    assert _gt303(leaf) == [15]
    fresh = BUGGY.replace("noisy = w + 1.0", "noisy = torch.randn(3)")
    assert _gt303(fresh) == [5]
    cloned = BUGGY.replace("return self.explain(noisy)",
                           "return self.explain(noisy.clone().detach())")
    assert _gt303(cloned) == [5]


def test_one_caller_passing_a_leaf_keeps_it_silent():
    mixed = BUGGY.replace("attack(2.0)", "attack(2.0)\n    prepare(torch.ones(3), 1.0)")
    assert _gt303(mixed) == [15]


def test_call_under_no_grad_or_rebound_parameter_stays_silent():
    nograd = BUGGY.replace("        return prepare(adv, scale)",
                           "        with torch.no_grad():\n            return prepare(adv, scale)")
    assert _gt303(nograd) == [16]
    rebound = BUGGY.replace("        x.requires_grad = True\n",
                            "        x = x.detach()\n        x.requires_grad = True\n")
    assert _gt303(rebound) == [16]


def test_flag_guarded_by_a_test_of_the_tensor_stays_silent():
    guarded = BUGGY.replace("        x.requires_grad = True\n",
                            "        if not x.requires_grad:\n            x.requires_grad = True\n")
    assert _gt303(guarded) == [16]
