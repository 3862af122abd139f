"""params.yaml: its schema, loading and the errors a user sees before any heavy work starts."""
