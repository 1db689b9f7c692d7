"""`size --executor ray` on a local 2-CPU Ray instance gives the serial executor's results."""

from __future__ import annotations

from typing import Any

import pytest

from fabricsim.sizing import Knobs, SizingSpec, size

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray() -> Any:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_engine_equals_serial(local_ray: Any) -> None:
    spec = SizingSpec(model="llama3-8b", tokens=1e12, gpus=(64,), systems=("dgx-h100", "dgx-b200"), fabrics=("ndr",),
                      oversubscription=(1.0, 2.0), gbs=(256,), knobs=Knobs(pp=(1, 2), mbs=(1, 2)))
    by_ray = size(spec, executor="ray").to_json()
    serial = size(spec, executor="serial").to_json()
    by_ray.pop("wall_s")
    serial.pop("wall_s")
    assert by_ray == serial
