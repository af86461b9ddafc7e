"""``pargraph.optim``: optimizers whose updates run as one dask graph per step."""

from pargraph.optim import lr_scheduler, swa_utils
from pargraph.optim.adam import Adam, AdamW
from pargraph.optim.adaptive import Adadelta, Adagrad, RMSprop
from pargraph.optim.lbfgs import LBFGS
from pargraph.optim.more import ASGD, Adafactor, Adamax, Muon, NAdam, RAdam, Rprop
from pargraph.optim.optimizer import Optimizer
from pargraph.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "NAdam",
           "RAdam", "Adamax", "Rprop", "ASGD", "Adafactor", "Muon", "LBFGS", "lr_scheduler",
           "swa_utils"]
