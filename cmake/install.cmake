# STUB: install rules come later.
