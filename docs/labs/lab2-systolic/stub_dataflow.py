# TODO(lab2): wire the array (docs/labs/lab2-systolic/README.md, "Exercise").
# pes[k][col] is the PE of row k, column col; taps[k][col] is its (load, weight) pair
# of the weight rows. Drive each PE's en, w_shift (load), x_in, w_in (weight) and
# psum_in so that the array computes the weight-stationary dataflow of
# the lab's Background (the PE's ports: hdl/pe.py, class PE), and self.result[col]
# from the bottom row. The input skew (one per row) and the output deskew (one per
# column) are delay lines, named f"x_row{k}" and f"sum_col{col}":
#     delay(m, value, cycles, name=..., en=self.en)        (hdl/pipeline.py)
# How many cycles each is the lab's question 2: start from PE.row_skew and
# self.latency. Delete the raise when you start.
raise NotImplementedError("lab 2: wire the array, its skew and deskew here "
                          "(docs/labs/lab2-systolic/README.md)")
for k in range(n):
    row_in = self.x_in[k]  # TODO(lab2): row k's operand after its skew
    for col in range(n):
        pe = pes[k][col]
        load, weight = taps[k][col]
        m.submodules[f"pe_{k}_{col}"] = pe  # names used by waves, figures
        m.d.comb += [
            # TODO(lab2): pe.en, pe.w_shift, pe.x_in, pe.w_in, pe.psum_in
        ]
for col in range(n):
    out = pes[n - 1][col].psum_out  # TODO(lab2): after column col's deskew
    m.d.comb += self.result[col].eq(out)
