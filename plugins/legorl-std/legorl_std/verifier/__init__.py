"""The test-script verifier and the per-test result stream it reads."""
