# Helpers shared by the check stages. Sourced, not run.

MEMQ_SKIPPED=()
# One build profile for every test, example and model: optimised (long stress runs and
# models stay fast) with debug assertions and overflow checks on.
export MEMQ_PROFILE=ci
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

banner() { printf '\n==== %s ====\n' "$*"; }
note() { printf -- '---- %s\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }

# skip WHAT WHY: say loudly that a step did not run, and remember it for the summary.
skip() {
    printf '\n!!! SKIPPING %s: %s\n\n' "$1" "$2" >&2
    MEMQ_SKIPPED+=("$1: $2")
}

# ensure_target TRIPLE [TOOLCHAIN]
ensure_target() {
    local tc=${2:-stable}
    rustup +"$tc" target list --installed 2>/dev/null | grep -qx "$1" ||
        run rustup +"$tc" target add "$1"
}

# ensure_component NAME [TOOLCHAIN]: returns non-zero if it cannot be installed.
ensure_component() {
    local tc=${2:-stable}
    rustup +"$tc" component list --installed 2>/dev/null | grep -q "^$1" ||
        rustup +"$tc" component add "$1"
}

# has_nightly: whether a nightly toolchain is available (installing it if possible).
has_nightly() {
    rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal >/dev/null 2>&1
}

# ensure_apt PACKAGE COMMAND: installs a Debian package if COMMAND is missing.
MEMQ_APT_UPDATED=0
ensure_apt() {
    command -v "$2" >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || return 1
    if [ $MEMQ_APT_UPDATED = 0 ]; then
        apt-get update -qq >/dev/null 2>&1 || return 1
        MEMQ_APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null 2>&1
    command -v "$2" >/dev/null 2>&1
}

# Where the ci profile puts binaries.
target_dir() { echo "${CARGO_TARGET_DIR:-target}/$MEMQ_PROFILE"; }
