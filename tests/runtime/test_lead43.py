"""The DDP layout table never hands a freed module's registration line to another module."""
import gc

import torch.nn as nn

from gradtrace.runtime.distributed.layout import Layouts


def test_freed_module_leaves_no_line_behind():
    lay = Layouts()
    gone = nn.Linear(2, 2)
    lay.registered(gone, ("old.py", 32))
    assert len(lay.sites) == 1
    del gone
    gc.collect()
    assert len(lay.sites) == 0  # an id() key would stay, ready for the next module at that address


def test_wrapped_reads_each_parameter_owner_line():
    lay = Layouts()
    net = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    lay.registered(net[0], ("train.py", 7))
    lay.wrapped(net, ("train.py", 12))
    got = lay.found[0]
    assert got["names"] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert got["sites"] == [["train.py", 7], ["train.py", 7], None, None]
    assert got["site"] == ["train.py", 12]
