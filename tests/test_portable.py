"""sweeper/base/portable.py, the one module a logged model carries: it computes what the project computes (the
MLP's forward pass, scikit-learn's text features, the table encoder) and imports only NumPy, SciPy and pandas."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import scipy.sparse

from sweeper.base import portable
from sweeper.data import columns
from sweeper.models.mlp import MLP, init_params


def test_it_imports_nothing_but_numpy_scipy_and_the_standard_library():
    tree = ast.parse(open(portable.__file__).read())
    names = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    names |= {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }
    # pandas: dates in other forms than ISO (01/02/2011), read as pandas reads them; a model's requirements name it
    allowed = {"__future__", "importlib", "re", "types", "typing", "numpy", "scipy", "pandas"}
    assert names <= allowed, names


def test_the_encoder_is_one_code_the_project_and_the_model_share():
    assert (
        columns.encode_rows is portable.encode_rows and columns.ColumnError is portable.ColumnError
    )


@pytest.mark.parametrize("task,k", [("regression", 1), ("binary", 1), ("multiclass", 4)])
@pytest.mark.parametrize("activation", ["relu", "tanh", "sigmoid"])
@pytest.mark.parametrize("depth", [0, 2])
def test_forward_is_the_mlps_prediction(task, k, activation, depth):
    params = init_params([5] + [7] * depth + [k], activation, 3, "float64")
    X = np.random.default_rng(1).normal(size=(20, 5))
    want = MLP(np, params, activation, task).predict(X)
    np.testing.assert_allclose(
        portable.forward(params, activation, task, X), want, rtol=1e-14, atol=1e-15
    )
    sparse = portable.forward(params, activation, task, scipy.sparse.csr_matrix(X))
    np.testing.assert_allclose(sparse, want, rtol=1e-12, atol=1e-15)


DOCS = [
    "WIN a FREE prize now!!",
    "see you at lunch, friend",
    "",
    "a b c",
    "Ünïcode wörds ünïcode 42 42",
    "win win win a free free lunch",
    "call 09061701461 now to claim",
]


@pytest.mark.parametrize("features", ["tfidf", "counts", "hashing"])
@pytest.mark.parametrize("ngram_max", [1, 2])
def test_vectorize_is_scikit_learns_transform(features, ngram_max):
    from types import SimpleNamespace

    from sweeper import data

    cfg = SimpleNamespace(
        features=features,
        max_features=0 if features != "hashing" else 64,
        min_df=1,
        ngram_max=ngram_max,
    )
    vec = data.vectorizer(cfg).fit(DOCS[:5])
    spec, arrays = data.vectorizer_state(vec, vars(cfg))
    want = vec.transform(DOCS).astype(np.float64).toarray()
    got = portable.vectorize(spec, arrays, DOCS)
    assert scipy.sparse.issparse(got) and got.shape == want.shape
    np.testing.assert_allclose(got.toarray(), want, rtol=1e-12, atol=1e-15)


def test_murmurhash_is_scikit_learns():
    from sklearn.utils import murmurhash3_32

    for term in [
        "",
        "a",
        "ab",
        "abc",
        "abcd",
        "abcde",
        "win free",
        "ünïcode",
        "09061701461",
        "x" * 37,
    ]:
        assert portable.murmurhash3_32(term.encode()) == murmurhash3_32(term, seed=0), term
