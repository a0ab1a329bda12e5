"""gpudiv: declarative static divergence analysis for GPU code.

Typical use::

    import gpudiv
    result = gpudiv.analyze("samples/musimd/sumTriangle.musimd")
    for var in result.kernel("sumTriangle").variables:
        print(var.name, var.klass)
"""

__version__ = "0.1.0"

__all__ = ["FileAnalysis", "analyze", "analyze_corpus", "analyze_text", "check",
           "export_facts", "load", "print_program", "solve_rules", "structure", "transform",
           "Budget", "fuse", "load_host", "run_host", "explain_motion",
           "__version__"]

# Public name → (module, attribute), imported on first use.
_LAZY = {
    "load": ("gpudiv.lang.load", "load"),
    "FileAnalysis": ("gpudiv.api", "FileAnalysis"),
    "analyze": ("gpudiv.api", "analyze"),
    "analyze_text": ("gpudiv.api", "analyze_text"),
    "check": ("gpudiv.api", "check"),
    "explain_motion": ("gpudiv.api", "explain_motion"),
    "analyze_corpus": ("gpudiv.report.corpus", "analyze_paths"),
    "export_facts": ("gpudiv.report.export", "export"),
    "solve_rules": ("gpudiv.report.experiment", "run_rules"),
    "transform": ("gpudiv.verify.transform_check", "transform"),
    "structure": ("gpudiv.analyses.structure", "analyze_file"),
    "print_program": ("gpudiv.lang.printing", "print_program"),
    "Budget": ("gpudiv.analyses.solve", "Budget"),
    "fuse": ("gpudiv.verify.host_check", "transform_host"),
    "load_host": ("gpudiv.lang.host.parse", "load_host"),
    "run_host": ("gpudiv.verify.host_check", "run_host_file"),
}


def __getattr__(name: str):
    """Import the API lazily so that `import gpudiv.<stage>` stays cheap."""
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'gpudiv' has no attribute {name!r}")
