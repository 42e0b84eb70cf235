"""Rule families; every concrete Rule subclass defined in a module here is discovered.

GT1xx graph breaks, GT2xx grad mode, GT3xx leaves and requires_grad, GT4xx registration and
optimizer wiring, GT5xx training loop and graph lifetime, GT6xx in-place, GT7xx autograd API,
GT9xx opt-in (off by default).
"""
