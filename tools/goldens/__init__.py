# Golden-case definitions checked against PyTorch: one module per op family of ops.def (named like
# its TG_FAMILY line) plus `normalization` for composites, each defining CASES = [Case(...), ...].
# tools/make_goldens.py turns them into tests/golden/data/<module>.golden.
