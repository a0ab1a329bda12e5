"""Reference interpreters: run kernels of the shared IR on a simulated SIMD machine."""

from gpudiv.interp.musimd import (
    Counters,
    ExecutionError,
    LaunchConfig,
    Observer,
    RunResult,
    TraceStep,
    format_trace,
    run_kernel,
)

__all__ = [
    "Counters",
    "ExecutionError",
    "LaunchConfig",
    "Observer",
    "RunResult",
    "TraceStep",
    "format_trace",
    "run_kernel",
]
