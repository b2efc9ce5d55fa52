# Model-based tests (proptest, core/tests/model.rs): random operation sequences applied to
# memq-core and to a reference model of the documented semantics must agree on every
# observable result. Stage 30 runs 256 sequences; this stage runs 100,000 per test (about 10 s
# in release on 2 cores; the time grows linearly with PROPTEST_CASES), from the same
# build.
run cargo test -p memq-core --profile "$MEMQ_PROFILE" --test model --no-run
PROPTEST_CASES="${PROPTEST_CASES:-100000}" \
    bounded 600 cargo test -p memq-core --profile "$MEMQ_PROFILE" --test model
