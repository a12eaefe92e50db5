# TODO(lab2): wire the n x n PEs of `pes` (pes[k][col]: row k, column col) into the array
# (docs/labs/lab2-systolic/README.md, "Exercise"). For every PE:
#   * add it as m.submodules[f"pe_{k}_{col}"] (the names waveforms and figures use);
#   * en and w_shift: the array's;
#   * x_in: row k's moving operand self.x_in[k] after the input skew (column 0), or the x_out
#     of its left neighbour;
#   * w_in: the weight chain loads from the bottom: self.w_in[col] for the bottom row, else
#     the w_out of the PE below;
#   * psum_in: +0 (the constant 0) for row 0, else the psum_out of the PE above.
# Then self.result[col] is the bottom PE's psum_out of column col after the output deskew.
# Skew and deskew are delay lines: delay(m, value, cycles, name=..., en=self.en)
# (hdl/pipeline.py; name them f"x_row{k}" and f"sum_col{col}"). How many cycles each?
raise NotImplementedError("lab 2: wire the array, its skew and deskew here "
                          "(docs/labs/lab2-systolic/README.md)")
