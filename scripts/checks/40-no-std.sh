# memq-core on bare metal: no std anywhere in its tree, and a program using it links.
run cargo build -p memq-core --no-default-features --target thumbv7em-none-eabi
run cargo build -p memq-core --no-default-features --features postcard --target thumbv7em-none-eabi
if cargo tree -p memq-core --no-default-features --features postcard -e normal \
    --target thumbv7em-none-eabi --prefix none --format '{p} {f}' | grep -E '(^| )std( |,|$)'; then
    echo "a dependency of memq-core enables std" >&2
    exit 1
fi
(cd checks/no_std && run cargo build --release --target thumbv7em-none-eabi)
