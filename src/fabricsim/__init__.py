"""fabricsim: which interconnect layer bounds a GPU workload, and what is the cheapest cluster that meets a target."""

from fabricsim.errors import SpecError

__version__ = "0.1.0"

__all__ = ["SpecError", "__version__"]
