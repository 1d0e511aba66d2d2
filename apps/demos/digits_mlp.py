"""A small MLP on scikit-learn's digits, trained alone or data-parallel over an allreduce.

The numeric half of the data-parallel training demo; it knows nothing of the network. The
model is 64 -> hidden (tanh) -> 10 (softmax), cross-entropy loss, plain SGD with a fixed
learning rate. Everything is float64: the parameters live in ONE flat array (the layers are
views into it) so a whole gradient is one ``allreduce`` call.

Every step uses a global batch of ``batch_size`` examples that is a pure function of
(seed, epoch, step). With N workers, worker k takes the k-th of N equal slices of that batch,
computes the mean gradient over its slice and asks for the mean over workers. The mean of equal
slices' means is the global mean, so :func:`train_worker` and :func:`train_single` agree up to
float rounding (the sums are taken in a different order), which is what ``WEIGHT_TOLERANCE``
bounds. Workers that receive the same reduced bits apply the same update, so all workers of one
run end with bit-identical weights.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

# ``coll.allreduce`` from compute/collective fits this: (array, op) -> the reduced array
Allreduce = Callable[[FloatArray, str], Awaitable[np.ndarray[Any, Any]]]
OnStep = Callable[[int, float], None]

N_FEATURES = 64  # 8x8 images
N_CLASSES = 10
_PIXEL_MAX = 16.0  # digits pixels are integers 0..16

# spawn keys keep the split and the schedule streams apart from default_rng(seed), which
# initialises the parameters (a plain [seed, epoch] would collide with [seed] at epoch 0)
_SPLIT_STREAM = 1
_SCHEDULE_STREAM = 2


class Tolerance(NamedTuple):
    rtol: float
    atol: float


# Data-parallel weights differ from single-process ones only by float64 rounding, grown over
# the run: measured <= 1e-15 absolute (weights ~1) after the default 150 steps with 1..64
# workers. This leaves a wide margin yet catches any real mistake (a wrong slice, or a sum
# taken for a mean, moves weights by > 1e-3).
WEIGHT_TOLERANCE = Tolerance(rtol=1e-9, atol=1e-12)


@dataclass(frozen=True)
class Config:
    seed: int = 0  # parameter initialisation and batch schedule
    steps: int = 150
    batch_size: int = 64  # the global batch; split evenly among workers
    hidden: int = 32
    learning_rate: float = 0.5
    split_seed: int = 0  # separate, so runs with different seeds share one test set
    test_fraction: float = 0.25

    def __post_init__(self) -> None:
        for name in ("seed", "split_seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("steps", "batch_size", "hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction}")


class Split(NamedTuple):
    x_train: FloatArray  # (n, 64) in [0, 1]
    y_train: IntArray  # (n,) labels 0..9
    x_test: FloatArray
    y_test: IntArray


class Layers(NamedTuple):
    w1: FloatArray  # (64, hidden)
    b1: FloatArray  # (hidden,)
    w2: FloatArray  # (hidden, 10)
    b2: FloatArray  # (10,)


# ---- data and schedule ---------------------------------------------------------------------


def _digits() -> tuple[FloatArray, np.ndarray[Any, Any]]:
    """scikit-learn's digits (pixels, labels), the arrays of its ``load_digits``.

    Read from scikit-learn's data file (sklearn/datasets/data/digits.csv.gz, parsed as
    load_digits parses it) without importing scikit-learn: that import pulls in scipy, 0.9 s
    of CPU in every process that trains on the digits (each rank of a DDP job), more than its
    training.  ``load_digits`` where the file is not there; ImportError naming the extra to
    install (``icn-net[examples]``) without scikit-learn."""
    spec = importlib.util.find_spec("sklearn")  # found, not imported
    if spec is not None and spec.origin is not None:
        path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            with gzip.open(path, "rt", encoding="utf-8") as f:
                data = np.loadtxt(f, delimiter=",")
            return data[:, :-1], data[:, -1].astype(int)
    try:
        from sklearn.datasets import load_digits  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            "the digits data set of the training demos ships inside scikit-learn, which is not "
            "installed: pip install 'icn-net[examples]' (or pip install scikit-learn)"
        ) from None
    digits = load_digits()
    return digits.data, digits.target


@functools.cache
def _split(split_seed: int, test_fraction: float) -> Split:
    pixels, labels = _digits()
    x = np.asarray(pixels, dtype=np.float64) / _PIXEL_MAX
    y = np.asarray(labels, dtype=np.intp)
    rng = np.random.default_rng(np.random.SeedSequence(split_seed, spawn_key=(_SPLIT_STREAM,)))
    order = rng.permutation(len(y))
    n_test = round(len(y) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    parts = Split(x[train], y[train], x[test], y[test])
    for part in parts:
        part.setflags(write=False)  # cached and shared by every caller
    return parts


def load_split(config: Config) -> Split:
    """The digits, scaled to [0, 1], split into train and test by ``config.split_seed``."""
    return _split(config.split_seed, config.test_fraction)


def steps_per_epoch(config: Config) -> int:
    """Full global batches in one pass over the training set (the remainder is skipped)."""
    n_train = len(load_split(config).y_train)
    if config.batch_size > n_train:
        raise ValueError(f"batch_size {config.batch_size} exceeds the {n_train} training examples")
    return n_train // config.batch_size


def batch_indices(config: Config, step: int, worker_index: int = 0, n_workers: int = 1) -> IntArray:
    """Training-set rows of worker ``worker_index`` of ``n_workers`` at global step ``step``.

    The global batch is a pure function of (seed, epoch, step within the epoch): each epoch is
    a fresh permutation of the training set cut into consecutive batches. Worker k gets the
    k-th equal slice of it, so the slices of all workers together are exactly the global batch.
    """
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    if not 0 <= worker_index < n_workers:
        raise ValueError(f"worker_index must be in 0..{n_workers - 1}, got {worker_index}")
    if config.batch_size % n_workers:
        raise ValueError(
            f"batch_size {config.batch_size} is not divisible by {n_workers} workers: "
            f"choose a batch size that is a multiple of the worker count"
        )
    epoch, within = divmod(step, steps_per_epoch(config))
    seq = np.random.SeedSequence(config.seed, spawn_key=(_SCHEDULE_STREAM, epoch))
    order = np.random.default_rng(seq).permutation(len(load_split(config).y_train))
    start = within * config.batch_size
    per_worker = config.batch_size // n_workers
    lo = start + worker_index * per_worker
    return order[lo : lo + per_worker]


# ---- the model -----------------------------------------------------------------------------


def n_params(hidden: int) -> int:
    return N_FEATURES * hidden + hidden + hidden * N_CLASSES + N_CLASSES


def layers(flat: FloatArray, hidden: int) -> Layers:
    """Views of the flat parameter (or gradient) array as the layers; writes go through."""
    if flat.shape != (n_params(hidden),):
        raise ValueError(f"expected {n_params(hidden)} parameters, got shape {flat.shape}")
    cuts = np.cumsum([N_FEATURES * hidden, hidden, hidden * N_CLASSES])
    w1, b1, w2, b2 = np.split(flat, cuts)
    return Layers(
        w1.reshape(N_FEATURES, hidden), b1, w2.reshape(hidden, N_CLASSES), b2.reshape(N_CLASSES)
    )


def init_weights(config: Config) -> FloatArray:
    """Weights ~ N(0, 1/fan_in) from ``default_rng(config.seed)``, biases zero."""
    rng = np.random.default_rng(config.seed)
    flat = np.zeros(n_params(config.hidden), dtype=np.float64)
    w1, _, w2, _ = layers(flat, config.hidden)
    w1[...] = rng.normal(0.0, 1.0 / np.sqrt(N_FEATURES), size=w1.shape)
    w2[...] = rng.normal(0.0, 1.0 / np.sqrt(config.hidden), size=w2.shape)
    return flat


def _logits(weights: FloatArray, x: FloatArray, hidden: int) -> tuple[FloatArray, FloatArray]:
    p = layers(weights, hidden)
    h = np.tanh(x @ p.w1 + p.b1)
    return h, h @ p.w2 + p.b2


def loss_and_grad(
    weights: FloatArray, x: FloatArray, y: IntArray, hidden: int
) -> tuple[float, FloatArray]:
    """Mean cross-entropy over the rows of ``x`` and its gradient, as a new flat array."""
    h, z = _logits(weights, x, hidden)
    z = z - z.max(axis=1, keepdims=True)  # exp cannot overflow
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = np.arange(len(y))
    loss = float(-log_p[rows, y].mean())

    dz = np.exp(log_p)
    dz[rows, y] -= 1.0
    dz /= len(y)
    p = layers(weights, hidden)
    grad = np.empty_like(weights)
    g = layers(grad, hidden)
    g.w2[...] = h.T @ dz
    g.b2[...] = dz.sum(axis=0)
    da = (dz @ p.w2.T) * (1.0 - h * h)
    g.w1[...] = x.T @ da
    g.b1[...] = da.sum(axis=0)
    return loss, grad


def accuracy(weights: FloatArray, config: Config) -> float:
    """Fraction of the held-out split classified correctly."""
    data = load_split(config)
    _, z = _logits(weights, data.x_test, config.hidden)
    return float((z.argmax(axis=1) == data.y_test).mean())


def compare(a: FloatArray, b: FloatArray) -> float:
    """Largest absolute difference between two weight arrays (see ``WEIGHT_TOLERANCE``)."""
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} and {b.shape}")
    return float(np.max(np.abs(a - b)))


# ---- training ------------------------------------------------------------------------------


def train_single(config: Config, on_step: OnStep | None = None) -> FloatArray:
    """SGD over the global batches in one process; returns the flat weights."""
    data = load_split(config)
    weights = init_weights(config)
    for step in range(config.steps):
        rows = batch_indices(config, step)
        loss, grad = loss_and_grad(weights, data.x_train[rows], data.y_train[rows], config.hidden)
        weights -= config.learning_rate * grad
        if on_step is not None:
            on_step(step, loss)
    return weights


async def train_worker(
    config: Config,
    worker_index: int,
    n_workers: int,
    allreduce: Allreduce,
    on_step: OnStep | None = None,
) -> FloatArray:
    """Worker ``worker_index`` of ``n_workers``: gradients of its slice, averaged over workers
    with one ``await allreduce(grad, "mean")`` per step; returns the flat weights.

    ``on_step(step, loss)`` gets this worker's slice loss (a global loss would cost a second
    allreduce per step).
    """
    batch_indices(config, 0, worker_index, n_workers)  # bad arguments fail before any round
    data = load_split(config)
    weights = init_weights(config)
    for step in range(config.steps):
        rows = batch_indices(config, step, worker_index, n_workers)
        loss, grad = loss_and_grad(weights, data.x_train[rows], data.y_train[rows], config.hidden)
        mean = np.asarray(await allreduce(grad, "mean"), dtype=np.float64)
        if mean.shape != grad.shape:
            raise ValueError(f"allreduce returned shape {mean.shape}, expected {grad.shape}")
        weights -= config.learning_rate * mean
        if on_step is not None:
            on_step(step, loss)
    return weights
