"""``python -m testbed.traces``: the trace catalogue's command line."""

from testbed.traces.catalogue import main

if __name__ == "__main__":
    raise SystemExit(main())
