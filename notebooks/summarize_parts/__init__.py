"""The parts of ``notebooks/summarize.py`` (the README's generated tables), split to keep each
module small: :mod:`.base` (result files, the row registry, formatting, the tables' headers)
and :mod:`.performance` / :mod:`.performance_webalps` (the benchmark rows).  Not programs: ``summarize.py`` is the one."""
