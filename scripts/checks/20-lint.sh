# Formatting, lints and docs: all must be clean. The committed lock files must be current
# (no version is picked at run time).
ensure_toolchain_pieces
run cargo metadata --locked --format-version 1 >/dev/null
run cargo metadata --locked --format-version 1 --manifest-path checks/no_std/Cargo.toml >/dev/null
run cargo fmt --all -- --check
# memq-core's layers (docs/ARCHITECTURE.md): no import circle, no use of a higher layer,
# files and functions within their sizes.
if command -v python3 >/dev/null; then
    run python3 scripts/layers.py
else
    skip "layers" "python3 is not installed"
fi
(cd checks/no_std && run cargo fmt -- --check)
run cargo clippy --workspace --all-targets --all-features --profile "$MEMQ_PROFILE" -- -D warnings
if [ "${MEMQ_QUICK:-0}" = 1 ]; then
    note "quick mode: the docs are checked by the full run"
    return 0
fi
RUSTDOCFLAGS="-D warnings" run cargo doc --workspace --no-deps --all-features --profile "$MEMQ_PROFILE"
# memq-core alone, with its default features only (no `serde`), and without `std` (the
# no_std build): links to feature-gated items must not break there either.
RUSTDOCFLAGS="-D warnings" run cargo doc -p memq-core --no-deps --profile "$MEMQ_PROFILE"
RUSTDOCFLAGS="-D warnings" run cargo doc -p memq-core --no-deps --no-default-features \
    --profile "$MEMQ_PROFILE"
