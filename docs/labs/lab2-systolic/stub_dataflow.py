# TODO(lab2): wire the array (docs/labs/lab2-systolic/README.md, "Exercise": the contract).
# Here: pes[k][col] (the PE of row k, column col, not yet added to m), taps[k][col] (the
# (load, weight) pair of its weight row), operands[k] (row k's operand, decoded, unskewed),
# n, self.en, self.result, self.latency, and delay() from hdl/pipeline.py. Delete the raise
# when you start.
raise NotImplementedError("lab 2: wire the array, its skew and deskew here "
                          "(docs/labs/lab2-systolic/README.md)")
