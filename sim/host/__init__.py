"""Software that drives the core as a host does: the register driver, programs, the
tensor engine's command encoder, the core and board hosts, the UART link."""
