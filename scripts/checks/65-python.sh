# The Python package (python/, crate memq-py): maturin builds the abi3 wheel with the
# workspace's target directory (so memq's crates are built once for every stage), a
# fresh virtual environment installs it, `import memq` works from outside the repository
# (the installed package, not the sources), and the pytest suite (python/tests) and the
# examples (python/examples) run against it. Then `pip install ./python` (as the README
# says, here without build isolation so that it reuses the build) installs it too.
#
# Needs python3 with venv, and PyPI for maturin and pytest (pinned below). Without PyPI,
# only this stage's steps skip, loudly.

MEMQ_MATURIN_VERSION=1.9.4
MEMQ_PYTEST_VERSION=8.4.2

if ! ensure_apt python3 python3; then
    skip "the Python package (python/)" "python3 missing and apt-get cannot install it"
    exit 0
fi
py_root="$(cd "${CARGO_TARGET_DIR:-target}" 2>/dev/null && pwd || echo "$PWD/target")/python-check"
mkdir -p "$py_root"
py_tools="$py_root/tools"
if [ ! -x "$py_tools/bin/python" ] && ! python3 -m venv "$py_tools" >/dev/null 2>&1 &&
    ! { apt_install python3-venv && python3 -m venv "$py_tools" >/dev/null 2>&1; }; then
    skip "the Python package (python/)" "python3 -m venv does not work here"
    exit 0
fi
py_pip=("$py_tools/bin/pip" install --quiet --disable-pip-version-check)
if ! "$py_tools/bin/maturin" --version 2>/dev/null | grep -qx "maturin $MEMQ_MATURIN_VERSION" ||
    ! "$py_tools/bin/pytest" --version 2>&1 | grep -q "pytest $MEMQ_PYTEST_VERSION"; then
    if ! run "${py_pip[@]}" "maturin==$MEMQ_MATURIN_VERSION" "pytest==$MEMQ_PYTEST_VERSION"; then
        skip "the Python package's wheel, install and pytest suite" \
            "PyPI is unreachable: pip could not install maturin $MEMQ_MATURIN_VERSION and pytest $MEMQ_PYTEST_VERSION"
        exit 0
    fi
fi

# ---- the wheel ----------------------------------------------------------------------------
# The ci profile (optimised, debug assertions on), as every other stage builds.
py_wheels="$py_root/wheels"
rm -rf "$py_wheels"
run "$py_tools/bin/maturin" build --manifest-path python/Cargo.toml --profile "$MEMQ_PROFILE" \
    --out "$py_wheels" --quiet
py_wheel=$(ls "$py_wheels"/memq-*-abi3-*.whl)
note "built $(basename "$py_wheel") ($(du -k "$py_wheel" | cut -f1) KiB)"

# ---- installed in a fresh environment, used from outside the repository ---------------------
py_venv="$py_root/venv"
rm -rf "$py_venv"
run python3 -m venv "$py_venv"
run "$py_venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$py_wheel"
# pytest comes from the tools environment's cache of PyPI's files, not PyPI again.
run "$py_venv/bin/pip" install --quiet --disable-pip-version-check "pytest==$MEMQ_PYTEST_VERSION"
py_run=$(mktemp -d)
cp -r python/tests "$py_run/tests"
cp -r python/examples "$py_run/examples"
repo=$PWD
(
    cd "$py_run"
    run "$py_venv/bin/python" -c "import memq, sys
assert memq.__file__.startswith(sys.prefix), memq.__file__
print('import memq:', memq.__version__, memq.__file__)"
    # The suite, the README's Python example among it.
    MEMQ_README="$repo/README.md" bounded 600 "$py_venv/bin/python" -m pytest -q -p no:cacheprovider tests
    if [ "${MEMQ_QUICK:-0}" = 1 ]; then
        bounded 300 "$py_venv/bin/python" examples/demo.py 2000
        bounded 300 "$py_venv/bin/python" examples/durable_demo.py 300
    else
        bounded 300 "$py_venv/bin/python" examples/demo.py
        bounded 300 "$py_venv/bin/python" examples/durable_demo.py
    fi
)
rm -rf "$py_run"

# ---- `pip install ./python`, as the README says ---------------------------------------------
# Into the tools environment, which has maturin: without build isolation pip uses it and
# the same target directory, so this reuses the build above instead of making another.
PATH="$py_tools/bin:$PATH" CARGO_TARGET_DIR="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)" \
    run "${py_pip[@]}" --no-build-isolation --force-reinstall --no-deps ./python
(cd "$py_root" && run "$py_tools/bin/python" -c "import memq; memq.Topic(1).close()")
