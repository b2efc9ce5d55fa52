# Helpers shared by the check stages. Sourced, not run.

# One build profile for every test, example and model: optimised (long stress runs and
# models stay fast) with debug assertions and overflow checks on.
export MEMQ_PROFILE=ci
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

# The packages and features of every build in that profile (stages 30, 50, 55 and 60).
# Cargo unifies a dependency's features over the packages a command selects, so two
# commands that select different packages build the engine twice: with `-p memq-bench` the
# peers add `bytes/serde`, with `-p memq-ffi` alone memq-core lost `postcard`, and each
# such difference recompiles memq-core, memq-store and memq and everything above them.
# With one selection the later stages find the libraries built: on the 2-core machine,
# cold, stage 50's build went from 2 min 26 s to 1 min 51 s and stage 60 from 122 s to
# 41 s (2026-12-07). memq-redis is
# left out: stage 67 builds and tests it with its servers (memq's `redis` feature still
# builds its library here). memq-bench's binaries have `test = false`, so that the test
# build does not compile them a second time as test harnesses.
MEMQ_PACKAGES=(--workspace --exclude memq-redis --all-features)

banner() { printf '\n==== %s ====\n' "$*"; }
note() { printf -- '---- %s\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }

# skip WHAT WHY: say loudly that a step did not run, and remember it for the summary
# (stages run in shells of their own: the list is a file scripts/check reads at the end).
skip() {
    printf '\n!!! SKIPPING %s: %s\n\n' "$1" "$2" >&2
    [ -z "${MEMQ_SKIP_FILE:-}" ] || printf '%s: %s\n' "$1" "$2" >>"$MEMQ_SKIP_FILE"
}

# The toolchain a plain `cargo` runs here (rustup's default, or RUSTUP_TOOLCHAIN, or a
# toolchain file): the stages that do not ask for nightly build with it, so what they need
# is installed into it, whatever it is called (`stable`, `1.95.0`, ...).
active_toolchain() {
    local tc
    tc=$(rustup show active-toolchain 2>/dev/null | awk 'NR == 1 { print $1 }')
    echo "${tc:-stable}"
}

# ensure_target TRIPLE [TOOLCHAIN]: TOOLCHAIN defaults to the active one.
ensure_target() {
    local tc=${2:-$(active_toolchain)}
    rustup +"$tc" target list --installed 2>/dev/null | grep -qx "$1" ||
        run rustup +"$tc" target add "$1"
}

# ensure_component NAME [TOOLCHAIN]: returns non-zero if it cannot be installed.
ensure_component() {
    local tc=${2:-$(active_toolchain)}
    rustup +"$tc" component list --installed 2>/dev/null | grep -q "^$1" ||
        rustup +"$tc" component add "$1"
}

# What the stable-side stages (lint, tests, no_std, features) need of the toolchain. Each
# of them asks, so that it also works alone (`scripts/check lint`); once installed, asking
# costs a fraction of a second.
ensure_toolchain_pieces() {
    ensure_component rustfmt
    ensure_component clippy
    ensure_target thumbv7em-none-eabi
}

# has_nightly: whether a nightly toolchain is available (installing it if possible; what
# rustup says when it cannot is shown). Components a stage needs of it (clippy, miri,
# rust-src) are each asked for with ensure_component: the minimal profile has none.
MEMQ_NIGHTLY=
has_nightly() {
    [ -n "$MEMQ_NIGHTLY" ] && return "$MEMQ_NIGHTLY"
    if rustup toolchain list | grep -q '^nightly' ||
        run rustup toolchain install nightly --profile minimal; then
        MEMQ_NIGHTLY=0
    else
        echo "rustup could not install a nightly toolchain (its output is above)" >&2
        MEMQ_NIGHTLY=1
    fi
    return "$MEMQ_NIGHTLY"
}

# apt_install PACKAGE: installs a Debian package (through `sudo -n` when not root),
# running `apt-get update` once per run first. apt's output is kept, and shown if it fails.
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "no apt-get here to install $1 with" >&2
        return 1
    fi
    local as_root=() log
    [ "$(id -u)" = 0 ] || as_root=(sudo -n)
    log=$(mktemp)
    if [ "${MEMQ_APT_UPDATED:-0}" = 0 ]; then
        if ! "${as_root[@]}" apt-get update -qq >"$log" 2>&1; then
            echo "apt-get update failed:" >&2
            cat "$log" >&2
            rm -f "$log"
            return 1
        fi
        export MEMQ_APT_UPDATED=1
    fi
    if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" \
        >"$log" 2>&1; then
        echo "apt-get install $1 failed:" >&2
        cat "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}

# ensure_apt PACKAGE COMMAND: installs PACKAGE if COMMAND is missing.
ensure_apt() {
    command -v "$2" >/dev/null 2>&1 && return 0
    apt_install "$1"
    command -v "$2" >/dev/null 2>&1
}

# The whole run's time budget: a step run with `bounded` is cut off when its own limit
# or what is left of the budget runs out, whichever comes first, so that a hang fails the
# run with a clear message well before CI's own limit (90 minutes). A full run takes 25-40
# minutes on a busy 2-core machine. The start is exported: every stage's shell counts from
# the same moment.
export MEMQ_BUDGET=${MEMQ_BUDGET:-4200}
export MEMQ_T0_EPOCH=${MEMQ_T0_EPOCH:-$(date +%s)}

# bounded SECS CMD...: runs CMD under `timeout` (and kills it 30 s later if it ignores
# that), for at most SECS seconds and never past the run's budget.
bounded() {
    local limit=$1 left=$((MEMQ_BUDGET - ($(date +%s) - MEMQ_T0_EPOCH)))
    shift
    if [ "$left" -le 0 ]; then
        echo "!!! the run's time budget (${MEMQ_BUDGET} s) is used up before: $*" >&2
        return 124
    fi
    [ "$limit" -le "$left" ] || limit=$left
    local rc=0
    run timeout -k 30 "$limit" "$@" || rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "!!! timed out after $limit s: $*" >&2
    fi
    return "$rc"
}

# Where the ci profile puts binaries.
target_dir() { echo "${CARGO_TARGET_DIR:-target}/$MEMQ_PROFILE"; }
