"""Hosts for SimPy models: a name and a CPU with a queue.

A :class:`Host` owns a ``simpy.Resource`` with ``cores`` servers. :meth:`Host.compute` runs a
job of a given service time (seconds on a reference machine, divided by the host's ``speed``),
waiting first for a free core (FIFO). Service times come from measurements (the benchmarks
save them as JSON) rather than from guesses inside the models.

Metrics are appended to lists during the run (``jobs``: label, queued, started, finished) and
:meth:`Host.jobs_frame` turns them into a DataFrame.

    >>> import simpy
    >>> env = simpy.Environment()
    >>> server = Host(env, "server", HostParams(cores=1))
    >>> _ = server.compute(1.0, "rsa"), server.compute(1.0, "rsa")
    >>> env.run()
    >>> env.now, server.utilisation()
    (2.0, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import simpy
from simpy.events import URGENT, Timeout

from .link import now_event

__all__ = ["HostParams", "Host"]


@dataclass(frozen=True)
class HostParams:
    """``cores`` parallel servers; ``speed`` relative to the machine the times were measured on."""

    cores: int = 1
    speed: float = 1.0

    def __post_init__(self) -> None:
        if self.cores < 1:
            raise ValueError(f"cores must be >= 1, got {self.cores}")
        if self.speed <= 0:
            raise ValueError(f"speed must be positive, got {self.speed}")


class Host:
    """A machine in a SimPy model (see the module docstring)."""

    def __init__(self, env: simpy.Environment, name: str,
                 params: HostParams = HostParams()) -> None:
        self.env = env
        self.name = name
        self.params = params
        self.cpu = simpy.Resource(env, capacity=params.cores)
        self.busy_time = 0.0
        self.job_label: list[str] = []
        self.job_queued: list[float] = []
        self.job_started: list[float] = []
        self.job_finished: list[float] = []

    def compute(self, seconds: float, label: str = "job") -> simpy.Event:
        """Start a job of ``seconds`` reference CPU time; the event fires when it is done.

        The job is a chain of callbacks that schedules what a process with
        ``with host.cpu.request() as req: yield req; yield env.timeout(t)`` would (its
        start, the request, the service time, the release, its end), at the same instants and
        in the same order, so jobs share the cores with such processes exactly as before.
        """
        if seconds < 0:
            raise ValueError(f"service time must be >= 0 s, got {seconds}")
        done = simpy.Event(self.env)
        _Job(self, seconds / self.params.speed, label, done)
        return done

    def utilisation(self) -> float:
        """Busy core-seconds / (cores × elapsed simulated time)."""
        return self.busy_time / (self.params.cores * self.env.now) if self.env.now else 0.0

    def jobs_frame(self) -> pd.DataFrame:
        """One row per finished job: label, queued, started, finished, wait."""
        df = pd.DataFrame({"label": self.job_label, "queued": self.job_queued,
                           "started": self.job_started, "finished": self.job_finished})
        df["wait"] = df["started"] - df["queued"]
        return df


class _Job:
    """One :meth:`Host.compute` job: queue for a core, hold it ``seconds``, log, fire ``done``."""

    __slots__ = ("host", "seconds", "label", "done", "queued", "started", "request")

    def __init__(self, host: Host, seconds: float, label: str, done: simpy.Event) -> None:
        self.host, self.seconds, self.label, self.done = host, seconds, label, done
        self.queued = self.started = 0.0
        now_event(host.env, self._begin, URGENT)     # where the process's Initialize was

    def _begin(self, _: simpy.Event) -> None:
        self.queued = self.host.env.now
        self.request = self.host.cpu.request()
        self.request.callbacks.append(self._granted)

    def _granted(self, _: simpy.Event) -> None:
        env = self.host.env
        self.started = env.now
        Timeout(env, self.seconds).callbacks.append(self._served)

    def _served(self, _: simpy.Event) -> None:
        host = self.host
        host.cpu.release(self.request)
        host.busy_time += self.seconds
        host.job_label.append(self.label)
        host.job_queued.append(self.queued)
        host.job_started.append(self.started)
        host.job_finished.append(host.env.now)
        self.done.succeed()
