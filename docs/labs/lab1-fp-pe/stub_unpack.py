# TODO(lab1): decode one operand (docs/labs/lab1-fp-pe/README.md, "Exercise").
# Drive the fields of `op` (an Operand) from `raw`, an operand of format `fmt`:
#   op.sign                   the sign bit
#   op.zero, op.inf, op.nan   the class flags (a comb signal you do not drive stays 0)
#   op.exp, op.sig            for finite non-zero values: value = sig * 2^(exp - 7), with the
#                             8-bit significand normalised (sig[7] == 1), subnormals included
# Useful: f = _FORMATS[fmt] (f.exp_bits, f.man_bits, f.bias, f.has_inf, f.width),
# fields = f.raw_layout(raw[:f.width]) (fields.sign, fields.exp, fields.man), _SIG_BITS,
# Cat(), Const(), m.If() / m.Else(), m.d.comb += ...
raise NotImplementedError("lab 1: decode the operand here (docs/labs/lab1-fp-pe/README.md)")
