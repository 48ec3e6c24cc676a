"""gpuclaim: Kubernetes DRA migration webhook and topology-aware scheduler extender."""

__version__ = "0.1.0"
__all__ = ["__version__"]
