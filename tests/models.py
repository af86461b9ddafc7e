"""Small models several test modules train."""

import pargraph
from pargraph import nn


class MeanOfTowers(nn.Module):
    """Independent towers on one input, their outputs averaged: branches to run side by side."""

    def __init__(self, towers: nn.ModuleList) -> None:
        super().__init__()
        self.towers = towers

    def forward(self, x):
        return pargraph.stack([t(x) for t in self.towers]).mean(0)
