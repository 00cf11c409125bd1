"""The network of the benchmarks' PyTorch training jobs (bench/train_steps.py,
bench/memory/train_job.py). torch is imported inside the function, so that
benchlib itself imports where there is no PyTorch (the unit tests)."""


def mlp(width, depth, relu_after_last, out_features=None):
    """`depth` Linear(width, width) layers with a ReLU between two (and after
    the last when `relu_after_last`), then Linear(width, out_features) if
    given. Built in this order on the CPU, so one seed gives one set of
    weights whichever job builds it."""
    from torch import nn

    layers = []
    for index in range(depth):
        layers.append(nn.Linear(width, width))
        if relu_after_last or index + 1 < depth:
            layers.append(nn.ReLU())
    if out_features:
        layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)
