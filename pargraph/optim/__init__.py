"""``pargraph.optim``: optimizers whose updates run as one dask graph per step."""

from pargraph.optim import lr_scheduler, swa_utils
from pargraph.optim.adadelta import Adadelta
from pargraph.optim.adafactor import Adafactor
from pargraph.optim.adagrad import Adagrad
from pargraph.optim.adam import Adam, AdamW
from pargraph.optim.adamax import Adamax
from pargraph.optim.asgd import ASGD
from pargraph.optim.lbfgs import LBFGS
from pargraph.optim.muon import Muon
from pargraph.optim.nadam import NAdam
from pargraph.optim.optimizer import Optimizer
from pargraph.optim.radam import RAdam
from pargraph.optim.rmsprop import RMSprop
from pargraph.optim.rprop import Rprop
from pargraph.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "NAdam",
           "RAdam", "Adamax", "Rprop", "ASGD", "Adafactor", "Muon", "LBFGS", "lr_scheduler",
           "swa_utils"]
