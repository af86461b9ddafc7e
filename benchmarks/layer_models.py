"""The convolution and attention workloads, written once for any PyTorch-compatible module
(``pargraph`` or ``torch``): the same program runs on both, as the brief asks of pargraph.

- ``conv``: one 3x3 convolution layer, 32 -> 64 channels on 32 images of 32x32, then global
  average pooling and a linear classifier: the cost of conv2d and its two gradients;
- ``cnn``: ``demos/cnn.py``'s convnet (an inception block of four branches, BatchNorm, max
  pooling) on digit-sized 8x8 images, batch 64;
- ``attention``: ``demos/attention.py``'s transformer encoder (2 layers, 4 heads, width 32) on
  8 tokens of 8 values, batch 64;
- ``lstm``: a 2-layer bidirectional LSTM (hidden 128) over 64 steps of 32 features, batch 32,
  classifying from its last output: its directions are parallel branches, and its layers a
  wavefront;
- ``charrnn``: PyTorch's character-level RNN tutorial as written there: a name of 8 one-hot
  letters (57) read one character at a time by two ``nn.Linear`` on one-row inputs (hidden
  128, 18 classes), and the update by hand, ``p.data.add_(p.grad.data, alpha=-lr)``: a
  program of many tiny ops, where the cost per op decides.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SHAPES = {"conv": ((32, 32, 32, 32), 10), "cnn": ((64, 1, 8, 8), 10),
          "attention": ((64, 8, 8), 10), "lstm": ((32, 64, 32), 10),
          "charrnn": ((8, 1, 57), 18)}


def build(lib: Any, workload: str) -> Any:
    nn = lib.nn
    if workload == "conv":
        return nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    if workload == "cnn":
        return _convnet(lib, 16)
    if workload == "lstm":
        return _recurrent(lib, 32, 128)
    return _transformer(lib, 32, 4, 2)


def _recurrent(lib: Any, features: int, hidden: int) -> Any:
    nn = lib.nn

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(features, hidden, num_layers=2, bidirectional=True,
                                batch_first=True)
            self.head = nn.Linear(2 * hidden, 10)

        def forward(self, x):  # (batch, seq, features)
            output, _ = self.lstm(x)
            return self.head(output[:, -1])

    return Tagger()


def _convnet(lib: Any, width: int) -> Any:
    nn = lib.nn

    class Inception(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.branches = nn.ModuleList([
                nn.Conv2d(width, width, 1),
                nn.Sequential(nn.Conv2d(width, width, 1), nn.ReLU(),
                              nn.Conv2d(width, width, 3, padding=1)),
                nn.Sequential(nn.Conv2d(width, width, 1), nn.ReLU(),
                              nn.Conv2d(width, width, 5, padding=2)),
                nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), nn.Conv2d(width, width, 1)),
            ])

        def forward(self, x):
            return lib.cat([branch(x) for branch in self.branches], dim=1)

    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
        Inception(), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4 * width, 2 * width, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, 10))


def _transformer(lib: Any, width: int, heads: int, layers: int) -> Any:
    nn = lib.nn

    class RowTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(8, width)
            self.position = nn.Embedding(8, width)
            layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.1,
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            tokens = self.embed(x) + self.position(lib.arange(8))
            return self.head(self.norm(self.encoder(tokens)).mean(1))

    return RowTransformer()


def _char_rnn_step(lib: Any) -> Any:
    """The tutorial's ``train(category_tensor, line_tensor)``, unchanged but for the names."""
    nn = lib.nn

    class RNN(nn.Module):
        def __init__(self, input_size: int, hidden_size: int, output_size: int) -> None:
            super().__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
            self.i2o = nn.Linear(input_size + hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, input, hidden):
            combined = lib.cat((input, hidden), 1)
            hidden = self.i2h(combined)
            output = self.softmax(self.i2o(combined))
            return output, hidden

        def init_hidden(self):
            return lib.zeros(1, self.hidden_size)

    (letters, _, alphabet), classes = SHAPES["charrnn"]
    lib.manual_seed(0)
    rnn = RNN(alphabet, 128, classes)
    criterion = nn.NLLLoss()
    rng = np.random.default_rng(1)
    line = np.zeros((letters, 1, alphabet), np.float32)
    line[np.arange(letters), 0, rng.integers(0, alphabet, letters)] = 1.0
    line_tensor, category_tensor = lib.tensor(line), lib.tensor([int(rng.integers(classes))])
    learning_rate = 0.005

    def step() -> float:
        hidden = rnn.init_hidden()
        rnn.zero_grad()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        return loss.item()

    step.compiled = None
    return step


def step_of(lib: Any, workload: str, compiled: str | None = None):
    """A training step (Adam, cross-entropy) of the workload's model on fixed random data;
    ``compiled``: ``"step"`` or ``"model"`` is what ``lib.compile`` compiles (the char-RNN's
    step is the tutorial's own, eager only)."""
    if workload == "charrnn":
        return _char_rnn_step(lib)
    lib.manual_seed(0)
    model = build(lib, workload)
    shape, classes = SHAPES[workload]
    rng = np.random.default_rng(1)
    x = lib.tensor(rng.standard_normal(shape).astype(np.float32))
    y = lib.tensor(rng.integers(0, classes, shape[0]))
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = lib.nn.CrossEntropyLoss()
    forward = lib.compile(model) if compiled == "model" else model

    def train(x, y):
        opt.zero_grad()
        loss = loss_fn(forward(x), y)
        loss.backward()
        opt.step()
        return loss

    run = lib.compile(train) if compiled == "step" else train

    def step() -> float:
        return run(x, y).item()

    step.compiled = run if compiled == "step" else None
    return step
