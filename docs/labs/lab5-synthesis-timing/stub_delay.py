# TODO(lab5): build `cycles` pipeline registers in m's `sync` domain, one after the other.
# Register i (Signal.like(value, name=f"{name}_d{i}"), i = 1, 2, ...) loads the one before it
# (register 1 loads `value`) on every clock edge where `en` is 1 -- on every edge if en is
# None -- and holds otherwise. Return the last register (`value` itself when cycles == 0).
raise NotImplementedError("lab 5: the pipeline registers of delay() "
                          "(docs/labs/lab5-synthesis-timing/README.md)")
