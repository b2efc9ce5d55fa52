# Toolchain pieces every later stage needs.
run ensure_component rustfmt
run ensure_component clippy
run ensure_target thumbv7em-none-eabi
