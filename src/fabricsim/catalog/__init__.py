"""Hardware catalog: GPUs, link technologies, switches, NICs, cables and system presets, each sourced."""

from fabricsim.catalog.catalog import CATEGORY_MODELS, Catalog
from fabricsim.catalog.cooling import CoolingClass, CoolingNeed
from fabricsim.catalog.fabric_control import DEFAULT_CONGESTION_CONTROL, CongestionControl
from fabricsim.catalog.launch import LaunchFlag, LaunchSettings, RenderedFlags, config_text, render_flags, set_option
from fabricsim.catalog.loader import (
    default_catalog,
    load_catalog,
    load_documents,
    read_packaged_yaml,
    read_spec_file,
    read_yaml,
    validation_message,
)
from fabricsim.catalog.models import (
    GPU,
    NIC,
    Cable,
    Count,
    Efficiency,
    Entry,
    LinkTech,
    Priced,
    ProtocolParams,
    SourcedRate,
    Switch,
    System,
    Tuning,
)
from fabricsim.catalog.networks import NETWORK_KINDS, network_id, network_link_id, network_names
from fabricsim.catalog.nvlink_domain import is_switch_system
from fabricsim.catalog.partial import partial_system_id, partly_used, power_of_two_part, split_partial_id
from fabricsim.catalog.power import (
    at_clock,
    at_power,
    clock_fraction,
    limit_systems,
    limited_system,
    with_gpu_clock,
    with_gpu_power,
)
from fabricsim.catalog.reliability import DEFAULT_STORAGE_TIER, FailureRate, FailureUnit, StorageServer, StorageTier
from fabricsim.catalog.roadmap import FigureBasis, cluster_entries, figure_basis, roadmap_warning
from fabricsim.catalog.scale_up import SCALE_UP_ALIASES, domain_switch, scale_up_variant

__all__ = [
    "CATEGORY_MODELS",
    "DEFAULT_CONGESTION_CONTROL",
    "DEFAULT_STORAGE_TIER",
    "GPU",
    "NETWORK_KINDS",
    "NIC",
    "SCALE_UP_ALIASES",
    "Cable",
    "Catalog",
    "CongestionControl",
    "CoolingClass",
    "CoolingNeed",
    "Count",
    "Efficiency",
    "Entry",
    "FailureRate",
    "FailureUnit",
    "FigureBasis",
    "LaunchFlag",
    "LaunchSettings",
    "LinkTech",
    "Priced",
    "ProtocolParams",
    "RenderedFlags",
    "SourcedRate",
    "StorageServer",
    "StorageTier",
    "Switch",
    "System",
    "Tuning",
    "at_clock",
    "at_power",
    "clock_fraction",
    "cluster_entries",
    "config_text",
    "default_catalog",
    "domain_switch",
    "figure_basis",
    "is_switch_system",
    "limit_systems",
    "limited_system",
    "load_catalog",
    "load_documents",
    "network_id",
    "network_link_id",
    "network_names",
    "partial_system_id",
    "partly_used",
    "power_of_two_part",
    "read_packaged_yaml",
    "read_spec_file",
    "read_yaml",
    "render_flags",
    "roadmap_warning",
    "scale_up_variant",
    "set_option",
    "split_partial_id",
    "validation_message",
    "with_gpu_clock",
    "with_gpu_power",
]
