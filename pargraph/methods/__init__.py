"""Tensor methods beyond the core class, by job: each module a mixin of ``Tensor``, joined here.

Every method is written with the class's own methods; every one is a ``pargraph.<name>``
function too (``functions.METHOD_FUNCTIONS``), but the in-place ones."""

from __future__ import annotations

from pargraph.methods.aliases import AliasMethods
from pargraph.methods.elementwise import ElementwiseMethods
from pargraph.methods.in_place import InPlaceMethods
from pargraph.methods.layout import LayoutMethods
from pargraph.methods.operators import OperatorMethods
from pargraph.methods.products import ProductMethods
from pargraph.methods.reductions import ReductionMethods
from pargraph.methods.shapes import ShapeMethods
from pargraph.methods.statistics import StatisticsMethods
from pargraph.methods.values import ValueMethods


class EverydayMethods(OperatorMethods, LayoutMethods, ShapeMethods, ProductMethods,
                      ReductionMethods, StatisticsMethods, ValueMethods, ElementwiseMethods,
                      InPlaceMethods, AliasMethods):
    """The methods; the class they join has ``_node``, ``shape``, ``dtype``, ``_apply`` (the
    one way to apply an op), ``_wrap`` (a tensor around a node), ``_operand`` (a value as an
    op's input), ``_shaped`` and ``_viewed_by`` (a result as a view whose in-place changes
    reach the tensor), ``_rebind``, ``_replace``, ``_check_in_place`` and the core's
    properties, conversions and autograd methods."""
