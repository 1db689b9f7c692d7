"""Where chunks of the search run: in this process, on a local process pool (default, all cores) or on a Ray
cluster (``--executor ray``, the ``scale`` extra). Every executor runs the same ``evaluate_task``."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, Literal

from fabricsim.errors import SpecError
from fabricsim.sizing.bound import Bound, attach_pool
from fabricsim.sizing.evaluate import ChunkResult, evaluate_task
from fabricsim.sizing.space import ClusterChoice
from fabricsim.sizing.spec import SizingSpec

Executor = Literal["local", "ray", "serial"]
Task = list[ClusterChoice]
OnResult = Callable[[ChunkResult], None]


def run_tasks(spec: SizingSpec, tasks: list[Task], done: frozenset[str], on_result: OnResult, *,
              executor: Executor = "local", workers: int | None = None, ray_address: str | None = None,
              bound: Bound | None = None) -> None:
    """Evaluate every task's unfinished chunks, calling ``on_result`` for each finished chunk as it arrives
    (with a `bound`, each chunk times only the plans that can change the answer)."""
    tasks = [t for t in tasks if any(c.chunk_id not in done for c in t)]
    if executor == "serial" or (executor == "local" and (workers == 1 or len(tasks) <= 1)):
        for task in tasks:
            for result in evaluate_task(spec, task, done, bound):
                on_result(result)
    elif executor == "local":
        _run_pool(spec, tasks, done, on_result, workers or os.cpu_count() or 1, bound)
    elif executor == "ray":
        _run_ray(spec, tasks, done, on_result, workers, ray_address, bound)
    else:
        raise SpecError(f"unknown executor {executor!r}; allowed: local, ray, serial", field="--executor")


def _run_pool(spec: SizingSpec, tasks: list[Task], done: frozenset[str], on_result: OnResult, workers: int,
              bound: Bound | None) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    shared: dict[str, Any] = {}
    if bound is not None:  # the workers share the objective values they find (`bound.SharedIncumbent`)
        shared = {"initializer": attach_pool,
                  "initargs": (bound.search, multiprocessing.Array("d", [math.inf] * bound.top))}
    with ProcessPoolExecutor(max_workers=workers, **shared) as pool:
        jobs = gpu_jobs(spec, tasks)
        if len(jobs) < workers:  # too few GPUs to keep every worker busy: deal the tasks out one by one
            jobs = [[task] for task in tasks]
        futures = [pool.submit(evaluate_tasks, spec, job, done, bound) for job in jobs]
        for future in as_completed(futures):
            for result in future.result():
                on_result(result)


def gpu_jobs(spec: SizingSpec, tasks: list[Task]) -> list[list[Task]]:
    """Tasks grouped by GPU, the largest group first: a worker that runs every task of a GPU prices each stage's
    network-free work once (`training` caches it per GPU and plan shape, whatever the cluster size), where tasks
    dealt out one by one have every worker price it again."""
    catalog = spec.catalog()
    jobs: dict[str, list[Task]] = {}
    for task in tasks:
        jobs.setdefault(catalog.system(task[0].system).gpu, []).append(task)
    return sorted(jobs.values(), key=lambda job: -sum(len(t) for t in job))


def evaluate_tasks(spec: SizingSpec, tasks: list[Task], done: frozenset[str], bound: Bound | None) -> list[ChunkResult]:
    """`evaluate_task` of each task in turn, in one worker (its caches shared)."""
    return [result for task in tasks for result in evaluate_task(spec, task, done, bound)]


def _run_ray(spec: SizingSpec, tasks: list[Task], done: frozenset[str], on_result: OnResult, workers: int | None,
             address: str | None, bound: Bound | None) -> None:
    try:
        import ray
    except ImportError:
        raise SpecError("Ray is not installed; pip install 'fabricsim[scale]'", field="--executor") from None
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    remote: Any = ray.remote(evaluate_task)
    pending = [remote.remote(spec, task, done, bound) for task in tasks]
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for result in ray.get(ready[0]):
            on_result(result)
