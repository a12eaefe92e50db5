"""Project tooling: the benchmarks, the README's generated tables, the docs and labs
checks."""
