"""The DVC stages, one thin module per stage in dvc.yaml: read the arguments and params, call the
library (da3_litert_farm), write the outputs atomically. Run as `python -m stages.<name>` from the
repository root; nothing imports a stage (tests/test_contracts.py)."""
