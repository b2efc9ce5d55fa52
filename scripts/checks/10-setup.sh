# Toolchain pieces every later stage needs (each stage that needs them asks again, so
# that it also runs alone). They go into the active toolchain, which plain cargo uses.
note "active toolchain: $(active_toolchain)"
run ensure_toolchain_pieces
