"""Tests of the SimPy building blocks and workloads (:mod:`netsim`)."""
