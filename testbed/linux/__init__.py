"""The root-only Linux lab: real programs in network namespaces over kernel-shaped links.

* :mod:`testbed.linux.netns` — the one namespace helper (create, wire, run in, sweep away);
* :mod:`testbed.linux.linktestbed` — client / middle / origin over ``tbf``-shaped veths;
* :mod:`testbed.linux.tundelay` — the userspace delay relay (``netem`` is not available);
* :mod:`testbed.linux.linkruns` — timed runs of real programs on the link testbed;
* :mod:`testbed.linux.capture` — tcpdump captures inside a namespace, bounded, always stopped.
"""
