# memq-core on bare metal: no std anywhere in its tree, a program using it links, and its
# suite passes on the locks it gets there (below).
ensure_toolchain_pieces
run cargo build -p memq-core --no-default-features --target thumbv7em-none-eabi
run cargo build -p memq-core --no-default-features --features postcard --target thumbv7em-none-eabi
# Each package with its features, `name version|feature,feature`: none may have `std` on.
# (An assignment of its own, so that a failing `cargo tree` fails the stage.)
nostd_tree=$(cargo tree -p memq-core --no-default-features --features postcard -e normal \
    --target thumbv7em-none-eabi --prefix none --format '{p}|{f}')
if awk -F'|' '$2 ~ /(^|,)std(,|$)/ { print; found = 1 } END { exit !found }' <<<"$nostd_tree"; then
    echo "a dependency of memq-core enables std (above)" >&2
    exit 1
fi
# memq-ring without std (it needs 64-bit atomics, which thumbv7em lacks: built for the
# host, where `#![no_std]` still keeps std out of it).
run cargo build -p memq-ring --no-default-features
(cd checks/no_std && run cargo build --release --target thumbv7em-none-eabi)
# memq-core's tests without `std`, on the host: the suite (topics, subscribers, groups,
# explicit-ack groups, on both engines), the reference model and the zero-allocation
# check, on the `spin` locks that bare-metal targets get (no backoff, no lock tuner). What
# needs `std` is compiled out: the tests of the blocking API, `StdClock`, the default timer
# and clock (core/tests/suite.rs), and the `stress` and `idle` binaries (their
# `required-features`). The dev profile: stage 90's doc tests without the default features
# build the same dependencies; about 30 s to build and 15 s to run on 2 cores.
run cargo test -p memq-core --no-default-features --lib --tests --no-run
bounded 600 cargo test -p memq-core --no-default-features --lib --tests
