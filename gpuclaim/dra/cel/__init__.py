"""The Kubernetes DRA CEL environments (1.34-1.37) on cel-python's grammar: checker, cost estimator, compiler.

Public API: :func:`compile_selector`, :class:`CompiledSelector`, :class:`SelectorCache`, :func:`match_devices`,
:func:`projection`, :func:`evaluate_expression`, :class:`CelCompileError`, :class:`CelRuntimeError`.
"""

from gpuclaim.dra.cel.api import (
    DEFAULT_CACHE,
    MAX_COST,
    MAX_LENGTH,
    CompiledSelector,
    Device,
    Mode,
    Outcome,
    PlainDevice,
    SelectorCache,
    compile_selector,
    compile_uncached,
    environment,
    evaluate_expression,
    match_devices,
    projection,
)
from gpuclaim.dra.cel.environment import Environment
from gpuclaim.dra.cel.errors import CelCompileError, CelRuntimeError
from gpuclaim.dra.cel.reads import Read

__all__ = [
    "DEFAULT_CACHE", "MAX_COST", "MAX_LENGTH", "CelCompileError", "CelRuntimeError", "CompiledSelector", "Device",
    "Environment", "Mode", "Outcome", "PlainDevice", "Read", "SelectorCache", "compile_selector", "compile_uncached",
    "environment", "evaluate_expression", "match_devices", "projection",
]
