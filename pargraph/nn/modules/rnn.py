"""``torch.nn.modules.rnn``: the same layers, from pargraph."""

from pargraph.nn import (  # noqa: F401
    GRU,
    LSTM,
    RNN,
    GRUCell,
    LSTMCell,
    RNNBase,
    RNNCell,
    RNNCellBase,
)
