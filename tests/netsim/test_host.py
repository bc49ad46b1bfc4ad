"""Host CPU model: FIFO service on a number of cores."""

from __future__ import annotations

import pytest
import simpy

from netsim.host import Host, HostParams


@pytest.mark.parametrize(("cores", "finish"), [(1, [1.0, 2.0, 3.0]), (2, [1.0, 1.0, 2.0]),
                                               (3, [1.0, 1.0, 1.0])])
def test_jobs_queue_for_cores(cores: int, finish: list[float]) -> None:
    env = simpy.Environment()
    host = Host(env, "h", HostParams(cores=cores))
    for i in range(3):
        host.compute(1.0, f"j{i}")
    env.run()
    df = host.jobs_frame()
    assert sorted(df["finished"]) == finish
    assert host.utilisation() == pytest.approx(3.0 / (cores * max(finish)))
    assert df["wait"].min() == 0.0


def test_speed_scales_service_time_and_validation() -> None:
    env = simpy.Environment()
    host = Host(env, "fast", HostParams(speed=4.0))
    host.compute(2.0)
    env.run()
    assert env.now == 0.5
    with pytest.raises(ValueError):
        host.compute(-1)
    with pytest.raises(ValueError):
        HostParams(cores=0)
