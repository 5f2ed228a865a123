"""Statistical equivalence suite: exact laws, hypothesis tests, mutants, and the suite runner."""
