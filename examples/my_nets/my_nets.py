"""A user's own network, written from scratch as in the seed article: a two-layer ReLU
network with its own backward pass. sweeper sweeps, batches, tracks and pins it like its
own MLP (see README.md beside this file).

The three idioms that make it batch for free (parameters stacked over a leading member axis):
``X @ W`` (never ``np.dot``), ``A.swapaxes(-1, -2)`` (never ``A.T``),
``dZ.sum(axis=-2, keepdims=True)`` (never ``axis=0``).
"""

import numpy as np


class TwoLayerNet:
    """``out = relu(X @ W1 + b1) @ W2 + b2``: ``hidden`` ReLU units, He-initialised.

    hidden: ReLU units of the hidden layer, >= 1
    init_scale: a factor on the He-normal initial weights, > 0
    """

    def __init__(self, hidden: int = 16, init_scale: float = 1.0):
        self.hidden, self.init_scale = hidden, init_scale

    def init(self, n_in, n_out, rng):
        s = self.init_scale
        return {
            "W1": rng.standard_normal((n_in, self.hidden)) * s * np.sqrt(2.0 / n_in),
            "b1": np.zeros((1, self.hidden)),
            "W2": rng.standard_normal((self.hidden, n_out)) * s * np.sqrt(2.0 / self.hidden),
            "b2": np.zeros((1, n_out)),
        }

    def forward(self, xp, params, X):
        Z1 = X @ params["W1"] + params["b1"]  # (n, hidden)
        A1 = xp.maximum(Z1, 0)
        out = A1 @ params["W2"] + params["b2"]  # (n, n_out)
        return out, (X, Z1, A1)

    def backward(self, xp, params, cache, dout):
        X, Z1, A1 = cache
        dZ1 = (dout @ params["W2"].swapaxes(-1, -2)) * (Z1 > 0)
        return {
            "W2": A1.swapaxes(-1, -2) @ dout,
            "b2": dout.sum(axis=-2, keepdims=True),
            "W1": X.swapaxes(-1, -2) @ dZ1,
            "b1": dZ1.sum(axis=-2, keepdims=True),
        }
