# Features stay additive: every crate with no features, each feature alone, with the
# defaults, and every pair of features, each lint-clean (cargo-hack); then memq-core's
# no_std features, each alone and together, on bare metal.
#
# No `--no-dev-deps`: it rewrites the manifests while it runs, and with resolver 2 a
# library check never sees dev-dependency features anyway.
ensure_toolchain_pieces
features_tool() { # NAME VERSION: installs a pinned cargo subcommand if missing.
    cargo install --list | grep -q "^$1 v$2:" || run cargo install --locked "$1" --version "=$2"
}
if features_tool cargo-hack 0.6.46; then
    run cargo hack clippy --workspace --feature-powerset --depth 2 -- -D warnings
    run cargo hack build -p memq-core --target thumbv7em-none-eabi \
        --feature-powerset --exclude-features std,default
elif ! ensure_apt python3 python3; then
    skip "feature combinations" \
        "neither cargo-hack 0.6.46 nor python3 (to list the features without it) can be had"
else
    skip "cargo-hack" "could not install cargo-hack 0.6.46: checking each feature alone instead"
    for pkg in memq-core memq; do
        # An assignment of its own, so that a failure here fails the stage.
        pkg_features=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == sys.argv[1]:
        print(" ".join(f for f in p["features"] if f != "default"))' "$pkg")
        [ -n "$pkg_features" ] || { echo "no features found for $pkg" >&2; exit 1; }
        for f in $pkg_features; do
            run cargo clippy -p "$pkg" --no-default-features --features "$f" -- -D warnings
        done
        run cargo clippy -p "$pkg" --no-default-features -- -D warnings
    done
    for f in "" serde postcard; do
        run cargo build -p memq-core --no-default-features ${f:+--features "$f"} \
            --target thumbv7em-none-eabi
    done
fi
# The doc examples without the default features: an example that needs `std` (a clock, the
# blocking API, the pools) must say so, or it fails to build or run here.
# Bounded: they block on futures and use the blocking API, so a lost wake-up would hang.
for pkg in memq-core memq; do
    bounded 600 cargo test -p "$pkg" --no-default-features --doc
done
