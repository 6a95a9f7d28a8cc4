# Golden-case definitions checked against PyTorch: one module per op family, each defining
# CASES = [Case(...), ...]. tools/make_goldens.py turns them into tests/golden/data/<module>.golden.
