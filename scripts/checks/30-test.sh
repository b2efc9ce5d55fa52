# Every unit, integration and doc test of every crate, all features on, in the ci
# profile (optimised, debug assertions on). This also builds every example and bench.
run cargo test --workspace --all-targets --all-features --profile "$MEMQ_PROFILE"
run cargo test --workspace --doc --all-features --profile "$MEMQ_PROFILE"
# The core alone with its default features, and without std on the host.
run cargo test -p memq-core --profile "$MEMQ_PROFILE" --lib --tests
