"""Hardware catalog: GPUs, link technologies, switches, NICs, cables and system presets, each sourced."""

from fabricsim.catalog.catalog import CATEGORY_MODELS, Catalog
from fabricsim.catalog.loader import default_catalog, load_catalog
from fabricsim.catalog.models import GPU, NIC, Cable, Efficiency, Entry, LinkTech, Switch, System

__all__ = [
    "CATEGORY_MODELS",
    "GPU",
    "NIC",
    "Cable",
    "Catalog",
    "Efficiency",
    "Entry",
    "LinkTech",
    "Switch",
    "System",
    "default_catalog",
    "load_catalog",
]
