"""The seed article's linear regression as a function trainer: its own epoch loop (with
the host syncs a from-scratch script has), swept, tracked and pinned by sweeper without
a forward/backward split."""


def fit(data, report, *, lr, epochs, seed, l2=0.0):
    """Full-batch gradient descent on ``mean((X w + b - y)²) + l2 ||w||²``; reports both
    losses every 10 epochs and stops where ``report`` says (patience, successive halving).

    l2: the weights' L2 penalty, >= 0
    """
    xp = data.xp
    n, d = data.X_train.shape
    w = xp.zeros((d, data.n_outputs), dtype=data.X_train.dtype)
    b = xp.zeros((1, data.n_outputs), dtype=data.X_train.dtype)
    for epoch in range(epochs + 1):
        err = data.X_train @ w + b - data.y_train
        if epoch % 10 == 0 or epoch == epochs:
            val = data.X_val @ w + b - data.y_val
            go_on = report(
                epoch, train_loss=float((err * err).mean()), val_loss=float((val * val).mean())
            )
            # early stopping (patience) or a halving rung: a run of sweeper's would stop here
            if not go_on:
                break
        if epoch == epochs:
            break
        w -= lr * (2.0 / n * data.X_train.T @ err + 2.0 * l2 * w)
        b -= lr * 2.0 / n * err.sum(axis=0, keepdims=True)

    def predict(X):
        return X @ w + b

    return predict
